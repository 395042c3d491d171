"""Chat prompts: a model's own chat template, rendered as transformers renders it.

A checkpoint's template (``chat_template.jinja``, or ``chat_template`` in
``tokenizer_config.json``) is jinja2 run in a sandbox with transformers'
settings and helpers: ``trim_blocks``/``lstrip_blocks``, the ``loopcontrols``
extension, a ``tojson`` that does not escape HTML, ``raise_exception``,
``strftime_now``, the special tokens (``bos_token``, ``eos_token``, ...) as
variables, ``add_generation_prompt``. The text is then encoded without special
tokens (the template writes its own BOS), so the ids equal
``apply_chat_template(messages, add_generation_prompt=True)``.

Models without a template (the presets' byte tokenizer) use the documented
fallback: each message as ``<|role|>\\n{content}\\n``, then ``<|assistant|>\\n``,
encoded with the tokenizer's own special tokens (the presets' BOS).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any


class ChatTemplateError(ValueError):
    """The model's chat template refused the messages (its ``raise_exception``) or failed."""


def fallback_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The documented template for models without one of their own."""
    return "".join(f"<|{m['role']}|>\n{m.get('content') or ''}\n" for m in messages) + "<|assistant|>\n"


def render(template: str, messages: Sequence[Mapping[str, Any]], special_tokens: Mapping[str, str],
           add_generation_prompt: bool = True) -> str:
    """The template's text for these messages (dicts with ``role`` and ``content``)."""
    import jinja2

    try:
        compiled = _compile(template)
        return compiled.render(messages=[dict(m) for m in messages], tools=None, documents=None,
                               add_generation_prompt=add_generation_prompt, **special_tokens)
    except jinja2.TemplateError as e:
        raise ChatTemplateError(f"the model's chat template refused the messages: {e}") from None


def chat_prompt_ids(tokenizer, messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Token ids of a chat's prompt, ready for the assistant's reply."""
    template = getattr(tokenizer, "chat_template", None)
    if template:
        text = render(template, messages, getattr(tokenizer, "special_tokens", {}))
        return tokenizer.encode(text, add_special_tokens=False)
    return tokenizer.encode(fallback_text(messages), add_special_tokens=True)


@lru_cache(maxsize=8)
def _compile(template: str):
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        """transformers' ``{% generation %}...{% endgeneration %}`` (it marks the assistant's
        tokens for training masks); here it renders its body and nothing else."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # jinja2's own tojson escapes HTML characters, which templates do not expect
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        return env.from_string(template)
    except jinja2.TemplateSyntaxError as e:
        raise ChatTemplateError(f"the model's chat template does not parse: {e}") from None
