"""Classic silent bugs of a paged KV cache, injectable one at a time.

None of these crash: the output just drifts. A fault is switched on only by passing it explicitly to one engine
(`LLMEngine(..., fault=Fault.EARLY_INCREMENT)`, paged layout only) or to one `Playground`; it lives in that object
and nowhere else, so it cannot leak into another engine, test or browser session, and nothing is on by default.
Validation is bypassed while a fault is active, so the symptom can be watched; `caught_by` names the check that
would have stopped it.

Each fault is acted out once, by a `FaultHook` (`fault_hook(fault, block_size, num_slots)`), at the link of the
chain it breaks: the write slots, the padding rows, the read tables, context_lens, positions, or the order of the
decode step's write and read. The engine's runner and the random-tensor bug lab (`lessons.buglab_tensors`) both call
the same hook, so they break the chain in the very same way. Without a fault the runner holds no hook: its main
path says `if fault:` where a fault acts.
"""

from .catalogue import FAULTS, Fault, FaultInfo, as_fault
from .hooks import HOOKS, NUM_PAD_ROWS, FaultHook, aliased_tables, fault_hook, writer_block_size

__all__ = ["FAULTS", "HOOKS", "NUM_PAD_ROWS", "Fault", "FaultHook", "FaultInfo", "aliased_tables", "as_fault",
           "fault_hook", "writer_block_size"]
