"""Classic silent bugs of a paged KV cache, injectable one at a time.

None of these crash: the output just drifts. A fault is on only when passed explicitly to one
engine (`LLMEngine(..., fault=Fault.EARLY_INCREMENT)`, paged layout only) or one `Playground`; it
lives in that object alone, so it cannot leak into another engine, test or session. Validation is
bypassed while a fault is active, so the symptom can be watched; `caught_by` names the check that
would have stopped it.

Each fault is acted out once, by a `FaultHook` (`fault_hook(fault, block_size, num_slots)`), at
the link it breaks: write slots, padding rows, read tables, context_lens, positions, or the order
of the decode step's write and read. The engine's runner and the random-tensor bug lab
(`lessons.buglab_tensors`) call the same hook, so they break the chain the same way. Without a
fault the runner holds no hook: its main path says `if fault:` where a fault acts.
"""

from .catalogue import FAULTS, Fault, FaultInfo, as_fault
from .hooks import HOOKS, NUM_PAD_ROWS, FaultHook, aliased_tables, fault_hook, writer_block_size

__all__ = ["FAULTS", "HOOKS", "NUM_PAD_ROWS", "Fault", "FaultHook", "FaultInfo", "aliased_tables",
           "as_fault", "fault_hook", "writer_block_size"]
