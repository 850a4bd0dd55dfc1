"""Small configuration dataclasses shared by the core, the model and the engine.

Each validates itself when built, so a bad value fails where it was written, with a message naming
the value and the rule, not deep inside a tensor operation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .checks import as_bool, as_float, as_int

MAX_NUM_BLOCKS = 2**20  # blocks in one pool: beyond any demo; more is refused, not a MemoryError
MAX_BLOCK_SIZE = 2**16  # tokens per block (vLLM uses 16-256)
MIN_TEMPERATURE = 1e-2  # below it (above 0), logits / temperature can overflow: inf, then NaN

PREEMPTION_MODES = ("recompute", "swap")
MAX_SWAP_BLOCKS = 2**20  # as MAX_NUM_BLOCKS (the swap chapter's pool): a mistake refused up front


def check_swap(mode, swap_space, chunked) -> int:
    """SchedulerConfig's swap fields: swap_space as an int.
    Raises: ValueError for another mode, swap_space outside [0, MAX_SWAP_BLOCKS] (swap: >= 1), or
    swap with chunked prefill (vLLM v1's chunked scheduler, as ours, preempts by recompute only)."""
    if mode not in PREEMPTION_MODES:
        raise ValueError(f"preemption_mode must be 'recompute' or 'swap', got {mode!r}")
    swap_space = as_int(swap_space, "swap_space", 0, MAX_SWAP_BLOCKS)
    if mode == "swap" and swap_space == 0:
        raise ValueError("preemption_mode 'swap' needs swap_space >= 1 (blocks of the host swap "
                         "pool)")
    if mode == "swap" and as_bool(chunked, "enable_chunked_prefill"):
        raise ValueError("preemption_mode 'swap' works with whole-prompt prefill only "
                         "(enable_chunked_prefill=False): vLLM v1's chunked scheduler preempts by "
                         "recompute only")
    return swap_space


def _set(obj, name: str, value) -> None:
    """Store a normalised field value on a frozen dataclass."""
    object.__setattr__(obj, name, value)


def _require(cond: bool, message: str) -> None:
    """Raises: ValueError(message) unless cond."""
    if not cond:
        raise ValueError(message)


def check_block_manager(num_blocks, block_size, watermark, seed, enable_prefix_caching) -> tuple:
    """BlockManager's arguments as (int, int, float, int | None, bool).
    Raises: ValueError for num_blocks outside [1, MAX_NUM_BLOCKS], block_size outside
    [1, MAX_BLOCK_SIZE], a watermark outside [0, 1), or a non-integer size."""
    num_blocks = as_int(num_blocks, "num_blocks", 1, MAX_NUM_BLOCKS)
    block_size = as_int(block_size, "block_size", 1, MAX_BLOCK_SIZE)
    watermark = as_float(watermark, "watermark", 0.0)
    _require(watermark < 1.0, f"watermark must be in [0, 1), got {watermark!r}")
    seed = None if seed is None else as_int(seed, "seed")
    return (num_blocks, block_size, watermark, seed,
            as_bool(enable_prefix_caching, "enable_prefix_caching"))


@dataclass(frozen=True)
class CacheConfig:
    """Shape of the physical KV cache pool.

    block_size: tokens per physical block (vLLM's default on GPU is 16).
    num_blocks: physical blocks; None: the engine derives it from `memory_budget_bytes`.
    watermark: share of blocks kept free when admitting prompts, so running sequences can still
        decode without preempting each other at once (vLLM uses 0.01).
    memory_budget_bytes: KV memory the engine may use when num_blocks is None.
    Raises: ValueError naming a field out of range or of the wrong type.
    """

    block_size: int = 16
    num_blocks: int | None = None
    watermark: float = 0.01
    memory_budget_bytes: int = 64 * 1024 * 1024
    seed: int | None = None  # shuffles the free list: blocks come out scattered (deterministically)
    enable_prefix_caching: bool = False  # reuse cached full blocks of equal prefixes (paged only)

    def __post_init__(self) -> None:
        _set(self, "block_size", as_int(self.block_size, "block_size", 1, MAX_BLOCK_SIZE))
        if self.num_blocks is not None:
            _set(self, "num_blocks", as_int(self.num_blocks, "num_blocks", 1, MAX_NUM_BLOCKS))
        _set(self, "watermark", as_float(self.watermark, "watermark", 0.0))
        _require(self.watermark < 1.0, f"watermark must be in [0, 1), got {self.watermark!r}")
        _set(self, "memory_budget_bytes",
             as_int(self.memory_budget_bytes, "memory_budget_bytes", 1))
        if self.seed is not None:
            _set(self, "seed", as_int(self.seed, "seed"))
        _set(self, "enable_prefix_caching",
             as_bool(self.enable_prefix_caching, "enable_prefix_caching"))


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-architecture decoder; names as transformers' LlamaConfig (config.json round-trips).

    The defaults are the shipped teaching model: trained in minutes on two CPU cores, yet with
    several layers and grouped-query attention (num_key_value_heads < num_attention_heads), so
    reading the right history through the block table visibly matters. The fields after
    eos_token_id cover how Qwen2 / Qwen3 differ from Llama (defaults: plain Llama); the properties
    say what each implies.
    Raises: ValueError naming a field out of range, of the wrong type, or sizes that disagree.
    """

    vocab_size: int = 259  # 256 bytes + BOS, EOS, SEP
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 1024
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 256
    eos_token_id: int | None = 257
    model_type: str = "llama"  # "llama", "qwen2" (q/k/v bias) or "qwen3" (RMSNorm on q/k heads)
    head_dim: int | None = None  # None: hidden_size // num_attention_heads; Qwen3 states its own
    attention_bias: bool = False  # Llama / Qwen3: bias on q, k, v and o (Qwen2's own is implied)
    # RoPE frequencies: "default" (theta ** (-2i / head_dim)) or "llama3" (Llama 3.1+: long
    # wavelengths slowed by rope_factor, short ones kept, a smooth blend between: the three
    # fields below apply to it only).
    rope_type: str = "default"
    rope_factor: float = 8.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_position_embeddings: int = 8192
    sliding_window: int | None = None  # W: a token sees itself and the W - 1 before (None: all)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                     "rope_original_max_position_embeddings"):
            _set(self, name, as_int(getattr(self, name), name, 1))
        for name in ("rms_norm_eps", "rope_theta", "rope_factor", "rope_low_freq_factor",
                     "rope_high_freq_factor"):
            _set(self, name, as_float(getattr(self, name), name, 0.0, lo_open=True))
        window = self.sliding_window
        _set(self, "sliding_window",
             None if window is None else as_int(window, "sliding_window (None: off)", 1))
        for name in ("tie_word_embeddings", "attention_bias"):
            _set(self, name, as_bool(getattr(self, name), name))
        for name in ("bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            _require(value is None or (isinstance(value, int) and not isinstance(value, bool)
                                       and value >= 0),
                     f"{name} must be an integer >= 0 or null, got {value!r}")
        _require(self.model_type in ("llama", "qwen2", "qwen3", "mistral"),
                 f"model_type must be 'llama', 'qwen2', 'qwen3' or 'mistral', got "
                 f"{self.model_type!r}")
        _require(not (self.model_type in ("qwen2", "mistral") and self.attention_bias),
                 f"attention_bias must be false for {self.model_type} (qwen2: its q/k/v bias comes "
                 "with the type)")
        _require(self.rope_type in ("default", "llama3"),
                 f"rope_type must be 'default' or 'llama3', got {self.rope_type!r}")
        _require(self.rope_high_freq_factor > self.rope_low_freq_factor,
                 f"rope_high_freq_factor ({self.rope_high_freq_factor}) must exceed "
                 f"rope_low_freq_factor ({self.rope_low_freq_factor})")
        if self.head_dim is None:
            _require(self.hidden_size % self.num_attention_heads == 0,
                     f"hidden_size ({self.hidden_size}) must be a multiple of num_attention_heads "
                     f"({self.num_attention_heads}) when head_dim is not given")
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        # Even: rotate-half RoPE pairs dimension i with i + head_dim / 2.
        _require(isinstance(self.head_dim, int) and not isinstance(self.head_dim, bool)
                 and self.head_dim >= 2 and self.head_dim % 2 == 0,
                 f"head_dim must be an even integer >= 2, got {self.head_dim!r}")
        _require(self.num_attention_heads % self.num_key_value_heads == 0,
                 f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                 f"num_key_value_heads ({self.num_key_value_heads})")

    @property
    def qkv_bias(self) -> bool:
        """q_proj, k_proj, v_proj have a bias (Qwen2 always; Llama, Qwen3 with attention_bias)."""
        return self.model_type == "qwen2" or self.attention_bias

    @property
    def o_proj_bias(self) -> bool:
        """o_proj has a bias (Llama / Qwen3 with attention_bias; never Qwen2)."""
        return self.attention_bias

    @property
    def qk_norm(self) -> bool:
        """Qwen3: an RMSNorm over head_dim on every query and key head, before RoPE."""
        return self.model_type == "qwen3"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SamplingParams:
    """How one request samples its tokens.

    temperature 0: greedy (argmax). Above 0, logits are divided by it, cut to the top_k most likely
    tokens and the smallest set reaching top_p, then sampled with a generator seeded by `seed` (the
    same tokens whatever else shares the batch).
    stop: strings ending the request once the generated text holds one (kept); one, list, tuple.
    seed: an integer in [0, 2**64); parallel sample i uses seed + i (mod 2**64).
    Raises: ValueError naming a field of the wrong type (ints refuse bools and floats, numbers must
    be finite, flags bools) or out of range; a temperature in (0, MIN_TEMPERATURE) overflows.
    """

    max_tokens: int = 32
    temperature: float = 0.0
    top_k: int = 0  # 0 = no top-k cut
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    n: int = 1  # parallel samples sharing the prompt's blocks

    def __post_init__(self) -> None:
        _set(self, "max_tokens", as_int(self.max_tokens, "max_tokens", 1))
        _set(self, "temperature", as_float(self.temperature, "temperature (0 = greedy)", 0.0))
        _require(self.temperature == 0 or self.temperature >= MIN_TEMPERATURE,
                 f"temperature must be 0 (greedy) or >= {MIN_TEMPERATURE}, got "
                 f"{self.temperature!r}: a smaller one makes logits / temperature overflow")
        _set(self, "top_k", as_int(self.top_k, "top_k (0 = off)", 0))
        _set(self, "top_p", as_float(self.top_p, "top_p", 0.0, 1.0, lo_open=True))
        if self.seed is not None:
            _set(self, "seed", as_int(self.seed, "seed", 0, 2**64 - 1))
        _set(self, "n", as_int(self.n, "n", 1))
        _set(self, "ignore_eos", as_bool(self.ignore_eos, "ignore_eos"))
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        _require(isinstance(stop, (list, tuple)) and all(isinstance(s, str) and s for s in stop),
                 f"stop must be a non-empty string or a list of them, got {self.stop!r}")
        _set(self, "stop", tuple(stop))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class SchedulerConfig:
    """Budgets of one scheduler step.

    max_num_batched_tokens: tokens fed to the model in one step (a prefill batch's prompts fit).
    max_num_seqs: sequences running at once.
    enable_chunked_prefill: vLLM v1's way: no phases; each step gives every running sequence its
        uncached tokens (1 for a decode) and waiting prompts a chunk, within the token budget, so a
        longer prompt is prefilled over several steps.
    speculative: off by default; ("ngram", k), "ngram:K" or a SpeculativeConfig (its chapter):
        a decode step then feeds each sequence up to k + 1 tokens, counted in the token budget.
    Raises: ValueError naming a field out of range or of the wrong type.
    """

    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 32
    enable_chunked_prefill: bool = False
    speculative: object = None
    preemption_mode: str = "recompute"  # or "swap": a victim's blocks go to a host swap pool
    swap_space: int = 0  # blocks of that pool; a victim that does not fit is recomputed instead

    def __post_init__(self) -> None:
        _set(self, "max_num_batched_tokens",
             as_int(self.max_num_batched_tokens, "max_num_batched_tokens", 1))
        _set(self, "max_num_seqs", as_int(self.max_num_seqs, "max_num_seqs", 1))
        _set(self, "enable_chunked_prefill",
             as_bool(self.enable_chunked_prefill, "enable_chunked_prefill"))
        from .chapters.speculative import as_speculative  # its chapter; it imports no config
        _set(self, "speculative", as_speculative(self.speculative))
        _set(self, "swap_space",
             check_swap(self.preemption_mode, self.swap_space, self.enable_chunked_prefill))
