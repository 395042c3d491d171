"""The request book: creating sequences, accepting committed tokens, finishing
them, and what callers get back (deltas, outputs, metrics)."""
from __future__ import annotations

import numbers
import threading

from photon_trace.telemetry.tracer import RequestEvent, Tracer, now_ns
from photon_trace.engine.outputs import RequestDelta, RequestMetrics, RequestOutput, TokenLogprob
from photon_trace.engine.params import SamplingParams
from photon_trace.engine.scheduler import StepPlan
from photon_trace.engine.sequence import FinishReason, Sequence


class RequestBook:
    def __init__(self, tokenizer, model_config, tracer: Tracer) -> None:
        self.tokenizer = tokenizer
        self.model_config = model_config
        self.tracer = tracer
        self.eos = frozenset(getattr(tokenizer, "eos_token_ids", ()) or model_config.eos_token_ids)
        self._seqs: dict[int, Sequence] = {}
        self._deltas: dict[int, list[int]] = {}
        self._delta_logprobs: dict[int, list[TokenLogprob]] = {}
        self._done: list[int] = []
        self._next_id = 0
        self._compiler = None
        self._compiler_lock = threading.Lock()

    def create(self, prompt, params: SamplingParams, seed: int, response_format) -> Sequence:
        """A new sequence; a text prompt is encoded as AutoTokenizer(prompt) would (with the
        tokenizer's own special tokens). Raises ValueError for anything unusable."""
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt, add_special_tokens=True)
        else:
            ids = list(prompt)
            if any(isinstance(t, bool) or not isinstance(t, numbers.Integral) for t in ids):
                raise ValueError("a prompt is a string or a list of token ids (ints)")
            ids = [int(t) for t in ids]
        if not ids:
            raise ValueError("the prompt is empty")
        vocab = self.model_config.vocab_size
        if any(t < 0 or t >= vocab for t in ids):
            raise ValueError(f"prompt token ids must be in [0, {vocab})")
        constraint = self.constraint(response_format)
        return Sequence(req_id=self._next_id, prompt=ids, params=params.for_vocab(vocab), seed=seed,
                        constraint=constraint, arrival_ns=now_ns(),
                        logprobs=[] if params.logprobs is not None else None)

    def constraint(self, response_format):
        """A fresh Constraint for a format (None for plain text); compiles once per format."""
        if response_format is None:
            return None
        from photon_trace.engine.constraints import ConstraintCompiler

        with self._compiler_lock:  # a server compiles on web threads too
            if self._compiler is None:
                self._compiler = ConstraintCompiler(self.tokenizer, self.model_config.vocab_size)
        return self._compiler.make(response_format)  # raises ConstraintError (a ValueError)

    def register(self, seq: Sequence) -> None:
        self._next_id += 1
        self._seqs[seq.req_id] = seq
        self.tracer.request(seq.req_id, RequestEvent.ARRIVAL, seq.arrival_ns, len(seq.prompt))

    def get(self, req_id: int) -> Sequence | None:
        return self._seqs.get(req_id)

    def note_admitted(self, plan: StepPlan) -> None:
        for r in plan.rows:
            if r.seq.admitted_ns == 0:
                r.seq.admitted_ns = now_ns()
                self.tracer.request(r.seq.req_id, RequestEvent.ADMITTED, r.seq.admitted_ns)

    def note_freed(self, seq: Sequence) -> None:
        self.tracer.request(seq.req_id, RequestEvent.FREED, now_ns())

    def accept(self, seq: Sequence, token: int, logprob: TokenLogprob | None = None) -> None:
        """A committed token of a live sequence: append it and check every stop condition."""
        seq.output.append(token)
        self._deltas.setdefault(seq.req_id, []).append(token)
        if seq.logprobs is not None:
            seq.logprobs.append(logprob)
            self._delta_logprobs.setdefault(seq.req_id, []).append(logprob)
        if len(seq.output) == 1:
            seq.first_token_ns = now_ns()
            self.tracer.request(seq.req_id, RequestEvent.FIRST_TOKEN, seq.first_token_ns)
        p = seq.params
        reason = None
        if seq.constraint is not None and self._advance(seq, token):
            reason = seq.finish_reason or FinishReason.CONSTRAINT
        elif token in self.eos and not p.ignore_eos:
            reason = FinishReason.EOS
        elif token in p.stop_token_ids:
            reason = FinishReason.STOP
        elif p.stop and self._hit_stop_string(seq):
            reason = FinishReason.STOP
        if reason is None and len(seq.output) >= p.max_tokens:
            reason = FinishReason.LENGTH
        if reason is not None:
            self.finish(seq, reason)

    @staticmethod
    def _advance(seq: Sequence, token: int) -> bool:
        try:
            return seq.constraint.advance(token)
        except RuntimeError:  # ConstraintViolation: end this request, keep the engine serving
            seq.finish_reason = FinishReason.ERROR
            return True

    def _hit_stop_string(self, seq: Sequence) -> bool:
        # Only the tail can complete a stop string: decode a window, not the whole output. The
        # window is sized in bytes, not tokens (a byte-level token can be a quarter of an emoji):
        # the stop string's UTF-8 length, plus 3 bytes so that a character the window's start
        # cuts (which decodes to replacement characters) lies before the stop string.
        need = max(len(s.encode("utf-8")) for s in seq.params.stop) + 3
        out, token_bytes = seq.output, self.tokenizer.token_bytes
        start, have = len(out), 0
        while start > 0 and have < need:
            start -= 1
            have += len(token_bytes(out[start]))
        tail = self.tokenizer.decode(out[start:])
        return any(s in tail for s in seq.params.stop)

    def finish(self, seq: Sequence, reason: FinishReason) -> None:
        seq.finalized = True
        seq.finish_reason = reason
        seq.finished_ns = now_ns()
        self._deltas.setdefault(seq.req_id, [])
        self._done.append(seq.req_id)
        event = RequestEvent.ABORTED if reason is FinishReason.ABORT else RequestEvent.FINALIZED
        self.tracer.request(seq.req_id, event, seq.finished_ns, len(seq.output))

    def take_deltas(self) -> list[RequestDelta]:
        if not self._deltas:
            return []
        done = set(self._done)
        out = []
        for rid, toks in self._deltas.items():
            seq = self._seqs[rid]
            fin = rid in done
            lps = self._delta_logprobs.get(rid, []) if seq.logprobs is not None else None
            out.append(RequestDelta(rid, toks, fin, seq.finish_reason.value if fin else None, lps))
        self._deltas.clear()
        self._delta_logprobs.clear()
        self._done.clear()
        return out

    def text(self, seq: Sequence) -> str:
        text = self.tokenizer.decode(seq.output)
        if seq.finish_reason is FinishReason.STOP and seq.params.stop:
            cut = min((text.find(s) for s in seq.params.stop if s in text), default=-1)
            if cut >= 0:
                text = text[:cut]
        return text

    def output(self, req_id: int, forget: bool = False) -> RequestOutput:
        seq = self._seqs[req_id]
        if forget and seq.finalized:
            del self._seqs[req_id]
        return RequestOutput(
            req_id=req_id, prompt_token_ids=seq.prompt, token_ids=list(seq.output),
            text=self.text(seq), finish_reason=seq.finish_reason.value if seq.finish_reason else None,
            metrics=metrics(seq) if seq.finalized else None,
            result=seq.constraint.result() if seq.constraint is not None else None,
            logprobs=list(seq.logprobs) if seq.logprobs is not None else None)

    def forget(self, req_id: int) -> None:
        seq = self._seqs.get(req_id)
        if seq is not None and seq.finalized:
            del self._seqs[req_id]


def metrics(seq: Sequence) -> RequestMetrics:
    ns = 1e-9
    first = seq.first_token_ns or seq.finished_ns
    n = len(seq.output)
    return RequestMetrics(
        queue_s=max(0, (seq.admitted_ns or seq.finished_ns) - seq.arrival_ns) * ns,
        ttft_s=max(0, first - seq.arrival_ns) * ns,
        tpot_s=(seq.finished_ns - first) * ns / (n - 1) if n > 1 else 0.0,
        e2e_s=(seq.finished_ns - seq.arrival_ns) * ns)
