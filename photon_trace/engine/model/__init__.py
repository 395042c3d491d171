"""The torch model: what runs where the weights live (the device side).

Config, layers, attention over paged KV, rotary embeddings, the decoder, the KV pool,
checkpoints and presets, tokenizers, and the forward batch. On the host-process device
all of this lives in the worker process; the scheduler sees only ``host_side``'s config
and tokenizer.
"""
