"""A sequence and the state rule. 序列与状态规则。

    cached_token_count  = tokens whose K/V are written in the cache / 已写入 KV cache 的 token 数
    generated_token_ids = tokens sampled so far / 已生成的 token

After prefill: cached_token_count == len(prompt_token_ids), generated_token_ids == [t1]. Each
decode step writes the newest token's K/V (cached += 1), then samples the next token. So before a
decode step exactly one token (the newest) is known but not yet cached.
prefill 之后：cached_token_count == prompt 长度，generated_token_ids == [t1]。每个 decode 步写入最新 token 的
K/V（cached 加 1），再采样下一个 token。所以 decode 前恰好有一个 token（最新的）还没写入 cache。
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sequence:
    """One request: its tokens, its block table and its place in the state rule. 一个请求。"""

    seq_id: int
    prompt_token_ids: list[int]
    generated_token_ids: list[int] = field(default_factory=list)
    block_table: list[int] = field(default_factory=list)  # logical block -> physical block
    cached_token_count: int = 0

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: all the sequence knows. prompt 加已生成的 token 数。"""
        # > return len(prompt_token_ids) + len(generated_token_ids)
        return len(self.prompt_token_ids) + len(self.generated_token_ids)

    @property
    def token_ids(self) -> list[int]:
        """Given. 已给出。"""
        return self.prompt_token_ids + self.generated_token_ids

    @property
    def last_token_id(self) -> int:
        """Given: the token the next decode step feeds. 已给出：下一个 decode 步输入的 token。"""
        return (self.generated_token_ids or self.prompt_token_ids)[-1]

    def on_prefill_done(self, first_token_id: int) -> None:
        """The prompt's K/V are written and the first token sampled.
        prompt 的 K/V 已写入，第一个 token 已采样。"""
        # > cached_token_count = len(prompt_token_ids)       # what was written / 写入了多少
        # > generated_token_ids.append(first_token_id)       # not written yet / 还没写入
        self.cached_token_count = len(self.prompt_token_ids)
        self.generated_token_ids.append(int(first_token_id))

    def on_decode_done(self, next_token_id: int) -> None:
        """The newest token's K/V are written, the next token sampled. 最新 token 的 K/V 已写入，下一个已采样。"""
        # > cached_token_count += 1                          # the token just written / 刚写入的那个
        # > generated_token_ids.append(next_token_id)        # its K/V come next step / 它的 K/V 下一步才写
        self.cached_token_count += 1
        self.generated_token_ids.append(int(next_token_id))
