"""The end-to-end exercise: the shipped model generates through the learner's code, beside its
contiguous twin.

A small greedy engine loop (the schedule fixed in advance: three prompts prefilled together, decode
steps, a fourth prompt admitted once the first has finished and been freed) whose Sequence,
BlockManager, slot_mapping, write_kv, gather_kv, attention and paged_attention_decode all come from
the learner's workspace. Every value the chain hands on is checked as it is made, in the chain's
order, against the library computing from the same inputs (a shadow pool written by the library's
write_kv, a ContiguousKVCache per sequence read by the library's attention), so the first link whose
value differs is named where it breaks, before any drift. At the end the tokens are compared with an
independent run of the contiguous twin (the library alone).

"""

from __future__ import annotations

import torch

from paged import addressing as ref_addr
from paged.attention import attention as ref_attention
from paged.kv_cache import ContiguousKVCache, KVCachePool
from paged.kv_cache import write_kv as ref_write_kv
from paged.model import load_model

from .links import Workspace, check_appended, check_freed, check_tables, decode_diagnosis
from .links import write_diagnosis
from .links import Failure, chain_link, close, expect_tensor, find_row, short
from .engine_plan import BLOCK_SIZE, SEED, TEXTS, Plan, last_rows, make_plan, schedule, twin_tokens

NUM_PAD_ROWS = 2  # padding rows (slot -1) appended to every decode write


class LearnerRun:
    """The learner's engine loop with the shadow checks (module docstring)."""

    def __init__(self, ws: Workspace, model, plan: Plan) -> None:
        cfg = model.config
        self.ws, self.model, self.plan = ws, model, plan
        self.bm = ws["block_manager"].BlockManager(plan.num_blocks, BLOCK_SIZE, seed=SEED)
        shape = (cfg.num_hidden_layers, plan.num_blocks, BLOCK_SIZE, cfg.num_key_value_heads,
                 cfg.head_dim)
        self.pool, self.shadow = (KVCachePool(*shape) for _ in range(2))
        self.caches = {
            i: ContiguousKVCache(shape[0], shape[3], shape[4]) for i in range(len(plan.prompts))
        }
        self.seqs: dict[int, object] = {}
        self.generated: dict[int, list[int]] = {}

    def live(self) -> list:
        return [self.seqs[i] for i in self.seqs if i not in self.finished]

    def run(self) -> list[list[int]]:
        self.finished: set[int] = set()
        for n, (group, prefill) in enumerate(schedule(self.plan)):
            self.step = n
            self.prefill(group) if prefill else self.decode(group)
            for i in group:
                if len(self.generated[i]) == self.plan.max_tokens[i]:
                    self.free(i)
        return [self.generated[i] for i in range(len(self.plan.prompts))]

    def where(self, what: str) -> str:
        return f"engine step {self.step}: {what}"

    # --- the chain, one step
    # ------------------------------------------------------------------------------------
    def prefill(self, group: list[int]) -> None:
        slots, pos, lens = [], [], []
        for i in group:
            seq = self.seqs[i] = self.ws["sequence"].Sequence(i, list(self.plan.prompts[i]))
            self.generated[i] = []
            self.bm.allocate(seq)
            check_tables(self.bm, self.live(), self.plan.num_blocks,
                         self.where(f"allocate(sequence {i})"), seq)
            n = len(self.plan.prompts[i])
            slots.append(self.slots(seq, 0, n))
            pos.append(torch.arange(n))
            lens.append(n)
        tables = [list(self.seqs[i].block_table) for i in group]
        ids = torch.cat([torch.tensor(self.plan.prompts[i]) for i in group])
        self.forward(group, ids, pos, torch.cat(slots), tables, lens, prefill=True)

    def slots(self, seq, start: int, end: int) -> torch.Tensor:
        shown = self.where(
            f"slot_mapping(sequence {seq.seq_id}'s table {list(seq.block_table)}, {start}, {end})"
        )
        got = expect_tensor(
            self.ws["addressing"].slot_mapping(seq.block_table, start, end, BLOCK_SIZE),
            (end - start,),
            "slot_mapping",
            "slot_mapping",
            shown,
        )
        want = ref_addr.slot_mapping(seq.block_table, start, end, BLOCK_SIZE)
        bad = (got.long() != want).nonzero()
        if bad.numel():
            k = int(bad[0])
            raise Failure(
                chain_link(start + k, list(seq.block_table), BLOCK_SIZE, int(got[k])),
                f"token {start + k}'s slot is wrong",
                f"token {start + k} 的 slot 不对",
                shown,
                want.tolist(),
                got.tolist(),
            )
        return want

    def decode(self, group: list[int]) -> None:
        slots, pos, lens = [], [], []
        for i in group:
            seq = self.seqs[i]
            known = len(self.plan.prompts[i]) + len(self.generated[i])
            shown = self.where(f"sequence {i} before its decode ({known} tokens known)")
            if seq.cached_token_count != known - 1:
                raise Failure(
                    "cached_token_count",
                    "before a decode step exactly one token is not yet cached",
                    "decode 前恰好有一个 token 还没写入 cache",
                    shown,
                    known - 1,
                    seq.cached_token_count,
                )
            token = seq.cached_token_count
            slot = self.bm.append_slot(seq)
            shown = self.where(f"append_slot(sequence {i}) for token {token}")
            want = check_appended(self.bm, seq, self.live(), self.plan.num_blocks, BLOCK_SIZE,
                                  token, slot, shown)
            slots.append(torch.tensor([want]))
            pos.append(torch.tensor([token]))
            lens.append(token + 1)
        tables = [list(self.seqs[i].block_table) for i in group]
        ids = torch.tensor([self.generated[i][-1] for i in group])
        self.forward(group, ids, pos, torch.cat(slots), tables, lens, prefill=False)

    def forward(self, group, ids, pos, slots, tables, lens, prefill: bool) -> None:
        def backend(layer, q, k, v):
            return self.attend(layer, q, k, v, group, pos, slots, tables, lens, prefill)

        logits = self.model(ids, torch.cat(pos), backend, rows=last_rows([len(p) for p in pos]))
        for i, tok in zip(group, logits.argmax(-1).tolist()):
            seq = self.seqs[i]
            self.generated[i].append(tok)
            seq.on_prefill_done(tok) if prefill else seq.on_decode_done(tok)
            want = len(self.plan.prompts[i]) + len(self.generated[i]) - 1
            shown = self.where(f"sequence {i} after its {'prefill' if prefill else 'decode'}")
            if seq.cached_token_count != want:
                raise Failure(
                    "cached_token_count",
                    "cached_token_count must count the tokens whose K/V are written",
                    "cached_token_count 应等于已写入 K/V 的 token 数",
                    shown,
                    want,
                    seq.cached_token_count,
                )
            if list(seq.generated_token_ids) != self.generated[i]:
                raise Failure(
                    "generated_token_ids",
                    "generated_token_ids must hold the tokens sampled so far",
                    "generated_token_ids 应是已采样的 token",
                    shown,
                    self.generated[i],
                    list(seq.generated_token_ids),
                )
        self.plan.steps.append(dict(prefill=prefill, seqs=list(group), slots=slots.tolist(),
                                    tables=tables, context_lens=lens,
                                    tokens=[self.generated[i][-1] for i in group]))

    def attend(self, layer, q, k, v, group, pos, slots, tables, lens, prefill) -> torch.Tensor:
        kc, vc = self.pool.layer(layer)
        skc, svc = self.shadow.layer(layer)
        # a decode batch padded with rows of slot -1, as CUDA graphs pad it: the write skips them
        if not prefill:
            wk, wv = (torch.cat([x, x[:1].expand(NUM_PAD_ROWS, *x.shape[1:])]) for x in (k, v))
            wslots = torch.cat([slots, torch.full((NUM_PAD_ROWS,), -1, dtype=torch.long)])
        else:
            wk, wv, wslots = k, v, slots
        self.ws["kv_cache"].write_kv(kc, vc, wk, wv, wslots.clone())
        ref_write_kv(skc, svc, wk, wv, wslots)
        shown = self.where(f"layer {layer}, write_kv at slots {wslots.tolist()}")
        for cache, want, rows, name in ((kc, skc, wk, "key"), (vc, svc, wv, "value")):
            if not torch.equal(cache, want):
                write_diagnosis(cache, want, rows, wslots.tolist(), name, shown)
        refs, at = [], 0
        for i, p in zip(group, pos):
            sl = slice(at, at + len(p))
            refs.append(self.caches[i].update(layer, p, k[sl], v[sl]))
            at += len(p)
        if prefill:
            return self.prefill_attention(layer, q, kc, vc, group, pos, tables, lens, refs)
        bt, cl = ref_addr.pad_block_tables(tables), torch.tensor(lens)
        shown = self.where(
            f"layer {layer}, paged_attention_decode(block_tables={tables}, context_lens={lens})"
        )
        out = expect_tensor(
            self.ws["attention"].paged_attention_decode(q, kc, vc, bt, cl),
            tuple(q.shape),
            "paged_attention_decode",
            "attention",
            shown,
        )
        for b, (keys, values) in enumerate(refs):
            want = ref_attention(q[b], keys, values)
            if not close(out[b], want):
                raise Failure(
                    self.decode_link(out[b], q[b], kc, vc, tables, lens, b),
                    f"decode attention of sequence {group[b]} differs from the contiguous twin's",
                    f"序列 {group[b]} 的 decode attention 与连续参考不同",
                    shown,
                    short(want),
                    short(out[b]),
                )
        return out

    def prefill_attention(self, layer, q, kc, vc, group, pos, tables, lens, refs) -> torch.Tensor:
        outs, at = [], 0
        for i, p, table, n, (keys, values) in zip(group, pos, tables, lens, refs):
            sl = slice(at, at + len(p))
            at += len(p)
            shown = self.where(
                f"layer {layer}, gather_kv(sequence {i}'s table {table}, context_len={n})"
            )
            got = self.ws["attention"].gather_kv(kc, vc, table, n)
            for g, ref, flat in (
                (got[0], keys, kc.flatten(0, 1)),
                (got[1], values, vc.flatten(0, 1)),
            ):
                g = expect_tensor(g, tuple(ref.shape), "gather_kv", "gather", shown)
                bad = [t for t in range(n) if not torch.equal(g[t], ref[t])]
                if bad:
                    src = find_row(flat, g[bad[0]])
                    raise Failure(
                        "gather" if src is None else chain_link(bad[0], table, BLOCK_SIZE, src),
                        f"gathered token {bad[0]} is not its K/V",
                        f"gather 出的 token {bad[0]} 不是它的 K/V",
                        shown,
                        f"slot {ref_addr.slot_of(bad[0], table, BLOCK_SIZE)}",
                        "no slot" if src is None else f"slot {src}",
                    )
            out = expect_tensor(
                self.ws["attention"].attention(q[sl], got[0], got[1], causal=True),
                tuple(q[sl].shape),
                "attention",
                "attention",
                shown,
            )
            want = ref_attention(q[sl], keys, values, causal=True)
            if not close(out, want):
                raise Failure(
                    "attention",
                    f"causal attention of sequence {i}'s prompt differs",
                    f"序列 {i} prompt 的因果 attention 不同",
                    shown,
                    short(want),
                    short(out),
                )
            outs.append(out)
        return torch.cat(outs)

    def decode_link(self, got, q, kc, vc, tables, lens, b) -> str:
        """context_len / block_table as links.decode_diagnosis names them, then the learner's own
        gather: gather, or attention."""
        link = decode_diagnosis(got, q, kc, vc, tables, lens, b)[0]
        if link != "attention":
            return link
        keys, _ = self.ws["attention"].gather_kv(kc, vc, tables[b], lens[b])
        slots = ref_addr.slot_mapping(tables[b], 0, lens[b], BLOCK_SIZE)
        same = (
            isinstance(keys, torch.Tensor)
            and keys.shape == kc.flatten(0, 1)[slots].shape
            and torch.equal(keys, kc.flatten(0, 1)[slots])
        )
        return "attention" if same else "gather"

    def free(self, i: int) -> None:
        seq = self.seqs[i]
        table = list(seq.block_table)
        freed = self.bm.free(seq)
        self.finished.add(i)
        shown = self.where(f"free(sequence {i}) holding {table}")
        check_freed(seq, table, freed, shown)
        check_tables(self.bm, self.live(), self.plan.num_blocks, shown)


@torch.no_grad()
def check_engine(ws: Workspace) -> dict:
    """The whole loop on the shipped model (module docstring); returns the texts and the steps for
    the app."""
    model, tokenizer = load_model()
    plan = make_plan(tokenizer)
    run = LearnerRun(ws, model, plan)
    twin = twin_tokens(model, plan)
    data = dict(texts=list(TEXTS), twin=[tokenizer.decode(t) for t in twin], steps=plan.steps,
                got=[], num_blocks=plan.num_blocks, block_size=BLOCK_SIZE)
    try:
        got = run.run()
    except Failure as err:
        err.data = data
        raise
    data["got"] = [tokenizer.decode(t) for t in got]
    for i, (a, b) in enumerate(zip(got, twin)):
        if a != b:
            k = next(j for j, (x, y) in enumerate(zip(a, b)) if x != y)
            err = Failure(
                None,
                f"request {i}: token {k} differs from the contiguous twin's though every tensor "
                "matched",
                f"请求 {i}：第 {k} 个 token 与连续参考不同，尽管每个张量都一致",
                TEXTS[i],
                b,
                a,
            )
            err.data = data
            raise err
    return data
