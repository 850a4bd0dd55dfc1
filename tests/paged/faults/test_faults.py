"""Each fault acts once, through its FaultHook, on exactly the link it names: checked link by link on a small
hand-built batch against expectations computed independently (the address chain of `paged.addressing.locate`, or
plain arithmetic); the hook without a fault leaves every input as it is."""

import ast
from pathlib import Path

import pytest
import torch

from paged.addressing import locate
from paged.engine.runner import prepare_inputs
from paged.faults import NUM_PAD_ROWS, Fault, FaultHook, fault_hook, writer_block_size
from paged.sequence import Sequence

pytestmark = pytest.mark.faults

BS, NUM_BLOCKS = 4, 16
NUM_SLOTS = BS * NUM_BLOCKS
TABLES = [[7, 2, 9], [4, 1], [15]]
SPANS = [(0, 10), (3, 6), (1, 4)]  # token ranges fed per row (a prefill-like step; row 2 reaches slot 63)


def batch_tokens(spans=SPANS):
    """(rows, token_index) of every fed token, built by hand: row r feeds tokens start … end - 1."""
    rows = [r for r, (start, end) in enumerate(spans) for _ in range(start, end)]
    tokens = [t for start, end in spans for t in range(start, end)]
    return torch.tensor(rows), torch.tensor(tokens)


def chain_slots(tables, spans=SPANS, block_size=BS):
    """The correct slot of every fed token, one `locate` at a time."""
    return [locate(t, tables[r], block_size).slot for r, (start, end) in enumerate(spans) for t in range(start, end)]


def written_slots(fault):
    rows, tokens = batch_tokens()
    hook = fault_hook(fault, BS, NUM_SLOTS)
    return hook.write_slots(torch.tensor(chain_slots(TABLES)), [list(t) for t in TABLES], rows, tokens).tolist()


def test_no_fault_is_the_identity():
    """Every link returns its input unchanged; no padding rows; write before read."""
    hook = fault_hook(None, BS, NUM_SLOTS)
    assert type(hook) is FaultHook and hook.fault is None and not hook.read_first
    assert written_slots(None) == chain_slots(TABLES)
    assert hook.pad_slots().numel() == 0
    lens, positions = torch.tensor([11, 7, 1]), torch.tensor([10, 6, 0])
    for decode in (False, True):
        assert hook.read_tables([list(t) for t in TABLES], decode) == TABLES
        assert hook.context_lens(lens, decode).tolist() == [11, 7, 1]
        assert hook.positions(positions, decode).tolist() == [10, 6, 0]


def test_slot_off_by_one_writes_every_token_one_slot_further():
    """Every slot = the chain's slot + 1, except the pool's last slot, which stays (clamped)."""
    expected = [min(s + 1, NUM_SLOTS - 1) for s in chain_slots(TABLES)]
    assert written_slots(Fault.SLOT_OFF_BY_ONE) == expected
    assert expected[-1] == NUM_SLOTS - 1 and expected[0] == 7 * BS + 1  # token 0 of row 0: block 7, offset 1


def test_block_size_mismatch_writes_with_the_writers_block_size():
    """Slots follow the chain with block size 2 (the writer's); a logical block past the table's end reuses the
    table's last entry."""
    wbs = writer_block_size(BS)
    assert wbs == 2
    padded = [t + [t[-1]] * 10 for t in TABLES]  # "past the end: the last entry", made explicit
    assert written_slots(Fault.BLOCK_SIZE_MISMATCH) == chain_slots(padded, block_size=wbs)
    assert written_slots(Fault.BLOCK_SIZE_MISMATCH)[:8] == [14, 15, 4, 5, 18, 19, 18, 19]  # row 0, by hand


def test_aliased_blocks_write_and_read_through_the_aliased_table():
    """Logical block 1 maps to logical block 0's physical block, on both sides; a one-block table is unchanged."""
    aliased = [[7, 7, 9], [4, 4], [15]]
    assert written_slots(Fault.ALIASED_BLOCKS) == chain_slots(aliased)
    hook = fault_hook(Fault.ALIASED_BLOCKS, BS, NUM_SLOTS)
    tables = [list(t) for t in TABLES]
    for decode in (False, True):
        assert hook.read_tables(tables, decode) == aliased
    assert tables == TABLES  # the block manager's own tables are not touched


def test_use_after_free_keeps_a_rows_table_until_it_grows():
    """At decode a row keeps the table it first saw until a longer one comes: after row 0's sequence finishes and
    a shorter one takes the row, row 0 still reads the dead table; prefill reads the real tables."""
    hook = fault_hook(Fault.USE_AFTER_FREE, BS, NUM_SLOTS)
    assert hook.read_tables([[3], [5]], decode=False) == [[3], [5]]
    assert hook.read_tables([[7, 2, 9], [4, 1]], decode=True) == [[7, 2, 9], [4, 1]]
    assert hook.read_tables([[4, 1], [8]], decode=True) == [[7, 2, 9], [4, 1]]  # both rows stale
    assert hook.read_tables([[4, 1, 6, 11], [8]], decode=True) == [[4, 1, 6, 11], [4, 1]]  # row 0 grew: refreshed


def test_late_increment_reads_one_token_less_at_decode():
    hook = fault_hook(Fault.LATE_INCREMENT, BS, NUM_SLOTS)
    assert hook.context_lens(torch.tensor([11, 7, 1]), decode=True).tolist() == [10, 6, 1]  # never below 1
    assert hook.context_lens(torch.tensor([11, 7, 1]), decode=False).tolist() == [11, 7, 1]


def test_position_off_by_one_shifts_decode_positions():
    hook = fault_hook(Fault.POSITION_OFF_BY_ONE, BS, NUM_SLOTS)
    assert hook.positions(torch.tensor([10, 6]), decode=True).tolist() == [11, 7]
    assert hook.positions(torch.tensor([10, 6]), decode=False).tolist() == [10, 6]


def test_pad_not_skipped_writes_row_zero_into_the_pools_last_slot():
    """NUM_PAD_ROWS padding rows of slot -1 wrap to the last slot and carry row 0's K/V; real rows land as asked."""
    hook = fault_hook(Fault.PAD_NOT_SKIPPED, BS, NUM_SLOTS)
    assert hook.pad_slots().tolist() == [NUM_SLOTS - 1] * NUM_PAD_ROWS
    key_cache, value_cache = torch.zeros(2, NUM_BLOCKS, BS, 1, 2).unbind(0)
    k, v = torch.arange(1.0, 7.0).view(3, 1, 2), -torch.arange(1.0, 7.0).view(3, 1, 2)
    hook.write(key_cache, value_cache, k, v, torch.tensor([5, 9, 20]))
    flat_k, flat_v = key_cache.view(NUM_SLOTS, 1, 2), value_cache.view(NUM_SLOTS, 1, 2)
    assert torch.equal(flat_k[[5, 9, 20]], k) and torch.equal(flat_v[[5, 9, 20]], v)
    assert torch.equal(flat_k[NUM_SLOTS - 1], k[0]) and torch.equal(flat_v[NUM_SLOTS - 1], v[0])
    assert int((flat_k != 0).any(-1).any(-1).sum()) == 4  # nothing else was written
    clean_k = torch.zeros_like(key_cache)
    fault_hook(None, BS, NUM_SLOTS).write(clean_k, torch.zeros_like(value_cache), k, v, torch.tensor([5, 9, 20]))
    assert not clean_k.view(NUM_SLOTS, 1, 2)[NUM_SLOTS - 1].any()  # no fault: the padding is skipped


@pytest.mark.parametrize("fault, order", [(None, ["write", "read"]), (Fault.EARLY_INCREMENT, ["read", "write"])])
def test_early_increment_reads_before_it_writes(fault, order):
    seen = []
    out = fault_hook(fault, BS, NUM_SLOTS).decode(lambda: seen.append("write"), lambda: seen.append("read") or 42)
    assert seen == order and out == 42


def decode_batch():
    seqs = []
    for i, (table, n) in enumerate(zip(TABLES, (11, 7, 2))):
        seq = Sequence(i, list(range(n)))
        seq.block_table, seq.cached_token_count = list(table), n - 1
        seqs.append(seq)
    return seqs, prepare_inputs(seqs, BS, False, torch.device("cpu"))


@pytest.mark.parametrize("fault", list(Fault), ids=lambda f: f.value)
def test_apply_changes_only_the_faults_links(fault):
    """apply() on a decode batch: each field equals the correct input passed through this fault's link, and only
    the fields the fault names differ from the correct batch."""
    seqs, batch = decode_batch()
    hook = fault_hook(fault, BS, NUM_SLOTS)
    out = hook.apply(batch, [s.block_table for s in seqs], NUM_BLOCKS)
    rows, tokens = batch_tokens([(10, 11), (6, 7), (1, 2)])
    right = chain_slots(TABLES, [(10, 11), (6, 7), (1, 2)])
    assert batch.slot_mapping.tolist() == right  # the correct batch is left as it was
    changed = {name for name in ("slot_mapping", "block_tables", "context_lens", "positions")
               if not torch.equal(getattr(out, name), getattr(batch, name))}
    expected_changes = {Fault.SLOT_OFF_BY_ONE: {"slot_mapping"}, Fault.BLOCK_SIZE_MISMATCH: {"slot_mapping"},
                        Fault.ALIASED_BLOCKS: {"slot_mapping", "block_tables"}, Fault.USE_AFTER_FREE: set(),
                        Fault.LATE_INCREMENT: {"context_lens"}, Fault.POSITION_OFF_BY_ONE: {"positions"},
                        Fault.EARLY_INCREMENT: set(), Fault.PAD_NOT_SKIPPED: set(),
                        Fault.STALE_SLOT_MAPPING: set()}  # (a first write: nothing to replay yet)
    assert changed == expected_changes[fault]
    assert out.slot_mapping.tolist() == hook.write_slots(torch.tensor(right), TABLES, rows, tokens).tolist()


def test_a_stale_slot_mapping_replays_the_last_write_of_the_same_size():
    """STALE_SLOT_MAPPING: a write of as many tokens as the last one lands at the last one's slots (the next
    decode step overwrites the previous token); a write of another size refreshes the slots."""
    hook = fault_hook(Fault.STALE_SLOT_MAPPING, BS, NUM_SLOTS)
    rows, tokens = batch_tokens([(10, 11), (6, 7), (1, 2)])
    first = hook.write_slots(torch.tensor(chain_slots(TABLES, [(10, 11), (6, 7), (1, 2)])), TABLES, rows, tokens)
    nxt = torch.tensor(chain_slots(TABLES, [(11, 12), (7, 8), (2, 3)]))  # the next decode step's right slots
    assert not torch.equal(first, nxt)
    assert torch.equal(hook.write_slots(nxt, TABLES, rows, tokens + 1), first)  # replayed: the bug
    two = torch.tensor(chain_slots(TABLES[:2], [(11, 12), (7, 8)]))
    assert torch.equal(hook.write_slots(two, TABLES[:2], rows[:2], tokens[:2] + 1), two)  # another size: refreshed


def test_no_fault_apply_checks_the_tables_and_a_fault_does_not():
    """The identity hook returns the batch itself but refuses a table that repeats a block; a fault hook lets it
    through so the bug shows."""
    seqs, batch = decode_batch()
    assert fault_hook(None, BS, NUM_SLOTS).apply(batch, [s.block_table for s in seqs], NUM_BLOCKS) is batch
    seqs[0].block_table = [7, 7, 9]
    batch = prepare_inputs(seqs, BS, False, torch.device("cpu"))  # the tables the step is built from
    with pytest.raises(ValueError, match="appears twice"):
        fault_hook(None, BS, NUM_SLOTS).apply(batch, [s.block_table for s in seqs], NUM_BLOCKS)
    out = fault_hook(Fault.LATE_INCREMENT, BS, NUM_SLOTS).apply(batch, [s.block_table for s in seqs], NUM_BLOCKS)
    assert out.block_tables[0].tolist() == [7, 7, 9]
    with pytest.raises(ValueError, match="unknown fault 'nope'"):
        fault_hook("nope", BS, NUM_SLOTS)


def runner_source_tree(source: str | None = None) -> ast.AST:
    path = Path(__file__).resolve().parents[3] / "paged" / "engine" / "runner.py"
    return ast.parse(path.read_text() if source is None else source)


def fault_branches(tree: ast.AST) -> list[str]:
    """Every use of a Fault member, and every branch condition or comparison that mentions a fault."""
    out = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
           and n.value.id == "Fault"]
    conditions = [n.test for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp, ast.While))]
    conditions += [n for n in ast.walk(tree) if isinstance(n, ast.Compare)]
    return out + [ast.unparse(c) for c in conditions if "fault" in ast.unparse(c)]


def test_runner_asks_whether_a_fault_is_set_never_which():
    """runner.py names no Fault member: it asks only whether a fault is set (`if self.fault:`, issue 37's visible
    branch) and the hook's public `read_first`; which fault acts is the hook's business. The other condition is the
    constructor's refusal of a fault on the contiguous (reference) layout."""
    allowed = {"fault is not None and kv_layout != 'paged'", "fault is not None", "self.fault", "fault",
               "self.fault and self.fault.read_first and (not self.batch.is_prefill)"}
    assert set(fault_branches(runner_source_tree())) <= allowed
    assert fault_branches(ast.parse("if self.fault is Fault.LATE_INCREMENT and decode:\n    pass")) != []


def test_without_a_fault_the_runner_holds_no_hook_and_still_checks_the_tables():
    """No identity object on the step's path (issue 37): an engine without a fault holds no hook, yet a
    block table that breaks a rule of the pool is still refused by name before the model runs."""
    from paged.engine import LLMEngine
    from paged.config import CacheConfig, SamplingParams
    from paged.model import load_model

    model, tok = load_model()
    engine = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=16))
    assert engine.runner.hook is None
    faulty = LLMEngine(model, tok, CacheConfig(block_size=4, num_blocks=16), fault="slot_off_by_one")
    assert faulty.runner.hook is not None and faulty.runner.hook.fault is Fault.SLOT_OFF_BY_ONE
    engine.add_request("abcdef", SamplingParams(max_tokens=3, ignore_eos=True))
    engine.step()
    (seq,) = engine.scheduler.running
    seq.block_table[0] = 99  # past the 16-block pool
    with pytest.raises(ValueError, match="99"):
        engine.runner.prepare([seq], is_prefill=False)


def test_catalogue_and_hooks_name_the_same_faults():
    """Every fault of the catalogue (paged/faults/catalogue.py) has exactly one hook (hooks.py) that says it is that
    fault, the identity hook is None's, and an unknown name is refused listing the valid ones."""
    from paged.faults import FAULTS, HOOKS

    assert set(HOOKS) == set(FAULTS) | {None} and set(FAULTS) == set(Fault)
    for fault, hook in HOOKS.items():
        assert hook.fault is fault and type(fault_hook(fault, 4, 64)) is hook
        assert fault is None or type(fault_hook(fault.value, 4, 64)) is hook
    with pytest.raises(ValueError, match="slot_off_by_one"):
        fault_hook("slot_off_by_two", 4, 64)
