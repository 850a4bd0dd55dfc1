"""The mini vLLM: scheduler, model runner, sampler, engine and step traces."""

from ..config import CacheConfig, SamplingParams, SchedulerConfig
from .checkpoint import EngineStepError
from .engine import LLMEngine, RequestOutput
from .scheduler import WHY_ENGLISH, Scheduler
from .trace import StepTrace
from .view import EngineView, engine_view

__all__ = ["CacheConfig", "EngineStepError", "EngineView", "LLMEngine", "RequestOutput",
           "SamplingParams", "Scheduler",
           "SchedulerConfig", "StepTrace", "WHY_ENGLISH", "engine_view"]
