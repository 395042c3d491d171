"""What every card, table column and legend entry of the dashboard means.

The page shows these as hover definitions (``title``); the glossary in
docs/observability.md is checked against them by a test, so the two say the same
thing. The causes are listed from ``Cause``, so a new cause is defined here as soon
as it exists.
"""
from __future__ import annotations

from photon_trace.telemetry.analysis.causes import ANOTHER_THREAD, DEPLOYMENT, DEVICE_SIDE, HOST_CODE, Cause

_LABELS = [c.label for c in Cause]

GLOSSARY: dict[str, str] = {
    # summary cards
    "period": "Median time from one decode step's first compute op to the next's, over the analysis window.",
    "forward": "Median device time of one step's forward pass (prefill or decode) in the window.",
    "sample": "Median device time of one step's sampling (masked sampling for constrained rows).",
    "bookkeeping": "Median host time per step in plan, launch, commit and finalize: the work a blocking "
                   "loop makes the device wait for, and a pipelined loop hides under the forward.",
    "device idle": "Share of the analysis window's time with work the compute stream ran nothing: bubbles "
                   "(gaps of 20 µs or more, each with a cause) plus the shorter dispatch gaps between ops.",
    "no work": "Share of the analysis window the engine had nothing to run (no request running or "
               "waiting: a server between requests). Its device idle is no bubble, has no cause to fix, "
               "and is left out of device idle, the diagnosis and the gate; drawn grey on the host lane.",
    "idle: host late": "Share of the window the device was idle *before* the next op was even enqueued: "
                       "the host was late. The rest of the idle is launch latency (the op was queued, the "
                       "device had not started it). An accidental sync's 'device idle caused' counts whole "
                       "bubbles, launch-latency part included, so it can be larger than this card.",
    "tokens/s": "Tokens appended per second of the analysis window (steady state). In live mode it greys "
                "out when the data stops coming.",
    # an imported trace's cards (any program: no tokens, no engine phases)
    "steps/s": "Steps (iterations: ProfilerStep#N, or the annotation or NVTX range named) per second of "
               "the analysis window.",
    "step period": "Median time from one step's first op on the analysed stream to the next step's.",
    "device busy": "Share of the analysis window the analysed stream ran an op (1 − device idle).",
    "idle: top cause": "The cause with the most idle in the window, and its share of all the idle.",
    "top kernel": "The op with the most device time in the window (all streams), and its share of all "
                  "op time there.",
    "device clock error": "How far a device time may be off the host clock: the error of the anchor "
                          "taken at the start of the run plus the drift measured at its end (0 on the "
                          "host-process device, which stamps the host's own clock). Bubble edges get this "
                          "much slack.",
    "accidental syncs": "Host waits the design did not expect (e.g. the mask-upload bug's drain), in the "
                        "window; each is marked ▼ on the timeline with its call site.",
    "bubbles": "Device idle gaps of 20 µs or more in the window, each given one cause.",
    "L (tokens/sequence)": "L: the mean number of tokens generated per request (the workload's, not a "
                           "quality). The zombie tax is about one wasted step per L tokens.",
    "z (zombie tax)": "z: the share of pipelined rows that were zombies (sequences already finished when "
                      "the step after was launched); the cost model takes (1 − z) off the speedup.",
    # diagnosis and the cause tables
    "cause": f"Why the device was idle: {', '.join(_LABELS[:-1])} or {_LABELS[-1]} (the same words on the "
             "timeline's legend). A gap with several causes is split: each is charged only the part it covers.",
    "call site / phase": "Where the cause is: the file:line of the wait, the host phase the device waited "
                         "for, or the copy it waited on.",
    "idle (ms)": "Device idle attributed to this row, in the analysis window.",
    "charged (ms)": "What removing this row's cause alone gives back: its own idle, where no other cause "
                    "interacts with it; where a sync and a slow phase share a gap, each is charged what its "
                    "own removal closes, so two rows' charges may overlap. Rows are ranked by it.",
    "share": "This row's charge over all bubble idle in the window (interacting rows' shares may add up to "
             "more than 100 %: each says what its own fix gives back).",
    "predicted speedup": "Throughput were this row's cause removed: window / (window − removable), with "
                         "a range. Removable is what the fix takes off the host's path to each gap, minus "
                         "the device's own launch latency the trace measures where the host was on time.",
    "who can fix it": f"'{HOST_CODE}' when changing the engine's host code removes this idle; "
                      f"'{ANOTHER_THREAD}' when the host thread was blocked off the CPU (the GIL another "
                      f"thread held, a lock, I/O, a sleep); '{DEPLOYMENT}' when it was runnable but the "
                      "machine ran something else (pin it, fewer processes per core); "
                      f"'{DEVICE_SIDE}' when it is the device starting queued work late (launch "
                      "latency), or holding it for work on another of its streams (an NCCL kernel), which "
                      "host code cannot shorten. Ranked apart, in that order.",
    "host descheduled": "Host-late idle while the engine's thread was runnable but not running (its "
                        "run-queue wait, from /proc/self/task/<tid>/schedstat): the machine ran something "
                        "else. Only the deployment removes it.",
    "host blocked": "Host-late idle while the engine's thread was neither running nor runnable, and not "
                    "waiting on the device: the GIL another thread held, a lock, I/O, a sleep.",
    "reason": "What the host was waiting for, as the engine recorded it.",
    # device time per op
    "op": "A device op's name (forward, sample, copy_back, ...; a kernel's in an imported trace).",
    "p50 (ms)": "The op's median duration in the window.",
    "p90 (ms)": "9 in 10 of the op's runs took this long or less.",
    "p99 (ms)": "99 in 100 of the op's runs took this long or less.",
    "total (ms)": "The op's device time in the window, all its runs.",
    "above the median (ms)": "The time the op's runs spent above its median, summed, and its share of all "
                             "device time: what the device would give back were every run as fast as the "
                             "median. A fifth of device time or more is a device-side finding.",
    "call site": "The file:line in the engine where the host waited (the first frame outside the device layer).",
    "count": "How many times.",
    "host wait (ms)": "Time the host spent blocked in these waits.",
    "device idle caused (ms)": "Device idle of the bubbles these waits caused, the serial host work after "
                               "the drain included.",
    "at": "When the bubble began, on the timeline's axis.",
    "step": "The step whose op ended the gap.",
    "idle": "How long the device was idle.",
    "detail": "The call site, host phase or copy op the cause points at.",
    # compare and cost model
    "metric": "A summary number, as on the cards.",
    "A": "Trace A's value (the trace picked first).",
    "B": "Trace B's value (the trace compared with A).",
    "B − A": "The difference; shares in percentage points.",
    "B / A": "The ratio.",
    "verdict": "better / worse only when the difference is outside the noise band stated above the "
               "table and, where a 95% interval is shown, the interval excludes no change; otherwise "
               "'within noise' or 'no clear change'. 'not valid': the machine changed between the runs "
               "(the device's own time per op moved) or was too busy, so no time is compared.",
    "95% interval": "B − A's bootstrap interval from each run's own per-step variability (steps resampled "
                    "in blocks; seeded, so the same pair gives the same interval).",
    "quantity": "An input or output of the cost model.",
    "value": "Its value.",
    "T_block": "The blocking run's mean step period over the whole run.",
    "T_pipe": "The pipelined run's mean step period over the whole run.",
    # range statistics and the idle breakdown
    "name": "A category: host phase, device op, wait kind or bubble cause.",
    "lane": "The host thread or device stream it ran on.",
    "total": "Summed duration inside the selected range (spans cut at its edges).",
    "share of range": "That total as a share of the selected range's length.",
    "mean": "Mean duration of the spans that overlap the range.",
    "p50": "Median duration.",
    "p99": "99th-percentile duration.",
    "stream": "A device stream (an in-order queue of device work).",
    "busy": "Share of the window the stream ran an op.",
    # the two views of idle, and nsys's expert rules (imported traces and ours alike)
    "view": "Per stream (ours): a stream is idle between its own ops, whatever the others do. Per device "
            "(Nsight's): the device is idle only while none of its streams runs. Both over the window.",
    "ops": "Device ops (kernels, copies, memsets) in the window.",
    "span": "From the first op's start to the last op's end, inside the window.",
    "idle share": "Idle as a share of the span.",
    "rule": "The rule's name in nsys analyze (Nsight Systems' expert system), with nsys's defaults: "
            "gpu_gaps 500 ms, gpu_time_util 30 chunks under 50 %.",
    "nsys title": "What Nsight Systems calls the rule.",
    "found": "How many rows the rule reports (nsys lists at most 50, longest first).",
    "Duration": "The row's duration, as nsys reports it (a call, a copy, a gap or a chunk).",
    "Start": "When it began, from the start of the trace's timeline.",
    # a distributed job (a folder of one trace per rank)
    "ranks": "How many ranks (processes, one trace each) the distributed job has.",
    "device activity": "Whether the trace holds any device op; a CPU trace has none, so no device idle.",
    "rank": "A process of the distributed job (its trace's distributedInfo rank, or the number in its file name).",
    "file": "The rank's trace file.",
    "device ops": "Kernels, copies and memsets in the rank's whole trace.",
    "comm/comp overlap": "Holistic Trace Analysis' computation–communication overlap: the share of the time "
                         "communication kernels (NCCL/RCCL) ran during which a computation kernel ran too, "
                         "over the rank's analysis window.",
    "first to fix": "The first row of the rank's own diagnosis, ranked as everywhere: host code's first.",
    "slowest rank": "The rank with the most work in the step (its step time less its waits in collectives "
                    "for the others): the one the others waited for.",
    "by": "Its work less the least work of any rank in that step.",
    "arrived last": "How often the rank was the last to reach a collective (the straggler the others waited for).",
    "waited for the last rank": "Time its collective kernels spent waiting for the last rank to arrive.",
    "transfer": "Time its collective kernels ran after every rank had arrived: the collective's own cost.",
    "collective": "One collective (all-reduce, broadcast, send/receive…), matched across ranks by kind and order.",
    # the timeline
    "analysis window": "The steady state the cards and tables describe: warm-up (filling the batch) and "
                       "drain (the batch emptying) are cut. Outside it the timeline is shaded and still "
                       "drawn and marked the same way, but nothing there is counted.",
    "pixel column": "Zoomed out, spans narrower than a pixel are summed per pixel column and drawn with a "
                    "height equal to the share of that column they occupy; nothing is widened.",
    "requests lane": "How many requests were decoding, in prefill or queued (waiting for admission) over "
                     "time; the lane's full height is the most in flight at once. Above it, a mark where "
                     "each request ended: a diamond when it finished (finalized), an x when it was aborted; "
                     "click one for that request's lifecycle.",
}


def define(term: str) -> str:
    """The definition shown on hover for ``term`` (a card label or column header)."""
    if term in GLOSSARY:
        return GLOSSARY[term]
    base = term.split(" (")[0]
    return GLOSSARY.get(base, "")
