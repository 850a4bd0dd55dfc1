"""The mini vLLM: scheduler, model runner, sampler, engine and step traces."""

from ..config import CacheConfig, SamplingParams, SchedulerConfig
from .checkpoint import EngineStepError
from .engine import LLMEngine, RequestOutput
from .trace import StepTrace

__all__ = ["CacheConfig", "EngineStepError", "LLMEngine", "RequestOutput", "SamplingParams", "SchedulerConfig",
           "StepTrace"]
