"""Write a planned step into its slot's host staging buffers (and read a committed
step's log-probabilities back out of them).

Everything here is known on the host before the previous step's tokens are:
a decode row's input token is not staged at all (``from_table``: the device
reads it from the token table), only its row, position and pages.
"""
from __future__ import annotations

import numpy as np

from photon_trace.telemetry.tracer import StepKind
from photon_trace.engine.device.base import LaunchShape
from photon_trace.engine.device.sampling import SamplingMode, sampling_mode as sample_mode
from photon_trace.engine.device.staging import SlotStaging
from photon_trace.engine.outputs import TokenLogprob
from photon_trace.engine.scheduler import StepPlan


def stage_plan(st: SlotStaging, plan: StepPlan, page_size: int, scratch_row: int) -> None:
    B, T = plan.num_rows, plan.num_tokens
    positions: list[int] = []
    mapping: list[int] = []
    q = 0
    ctx, qstart, last, row_ids, temp, top_k, top_p, min_p, seed, presence, frequency, first = ([] for _ in range(12))
    st.page_table[:B, :plan.max_pages] = 0
    for b, r in enumerate(plan.rows):
        seq, s, n = r.seq, r.start, r.num_tokens
        pages = seq.pages
        if r.prefill:
            st.tokens[q:q + n] = seq.prompt[s:s + n]
            st.from_table[q:q + n] = False
            pos = range(s, s + n)
        else:
            st.from_table[q] = True
            st.token_row[q] = seq.row
            pos = (s,)
        positions.extend(pos)
        mapping.extend(pages[p // page_size] * page_size + p % page_size for p in pos)
        st.page_table[b, :len(pages)] = pages
        q += n
        ctx.append(s + n)
        qstart.append(q)
        last.append(q - 1)
        p = seq.params
        row_ids.append(seq.row if r.samples else scratch_row)
        # a row that does not sample (a non-final prefill chunk) is sampled greedily into scratch
        temp.append(p.temperature if r.samples and not p.greedy else 0.0)
        top_k.append(p.top_k)
        top_p.append(p.top_p)
        min_p.append(p.min_p)
        seed.append(seq.seed)
        presence.append(p.presence_penalty if r.samples else 0.0)
        frequency.append(p.frequency_penalty if r.samples else 0.0)
        first.append(r.samples and seq.scheduled == 1)   # plan() counted this draw already
    st.positions[:T] = positions
    st.slot_mapping[:T] = mapping
    st.context_lens[:B] = ctx
    st.query_start[0] = 0
    st.query_start[1:B + 1] = qstart
    st.logits_index[:B] = last
    st.row_ids[:B] = row_ids
    st.temperature[:B] = temp
    st.top_k[:B] = top_k
    st.top_p[:B] = top_p
    st.min_p[:B] = min_p
    st.seed[:B] = seed
    st.presence[:B] = presence
    st.frequency[:B] = frequency
    st.first_sample[:B] = first
    # the sampling counter is the position of the token being drawn: batch-independent
    st.sample_pos[:B] = ctx


def launch_shape(plan: StepPlan) -> LaunchShape:
    """The step's forward as the device sees it: host-known ints only."""
    return LaunchShape(num_tokens=plan.num_tokens, num_rows=plan.num_rows, max_pages=plan.max_pages,
                       max_query_len=plan.max_query_len, prefill=plan.kind != StepKind.DECODE,
                       segments=plan.segments)


def sampling_mode(plan: StepPlan, lo: int, hi: int) -> SamplingMode:
    """How rows [lo, hi) are sampled (see sampling.sample); rows that do not sample are greedy."""
    return sample_mode([r.seq.params if r.samples else None for r in plan.rows[lo:hi]])


def fill_masks(masks: np.ndarray, plan: StepPlan) -> None:
    """Allowed-token bitmasks of the constrained rows [split, B), from the state commit just made current."""
    for b in range(plan.split, plan.num_rows):
        seq = plan.rows[b].seq
        m = masks[b]
        if seq.finalized:
            m[:] = -1  # a zombie's draw is discarded; allow everything so the math stays finite
        else:
            m[:] = 0
            seq.constraint.fill_mask(m)


def read_logprob(st: SlotStaging, b: int, token: int, top: int | None) -> TokenLogprob | None:
    """Row b's log-probabilities from the copy-back (None when its request did not ask)."""
    if top is None:
        return None
    ids = st.out_top_ids[b, :top].tolist()
    values = st.out_top_logprobs[b, :top].tolist()
    return TokenLogprob(token, float(st.out_logprob[b]), tuple(zip(ids, values)))
