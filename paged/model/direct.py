"""Direct: the base of paged.model's Llama modules, nn.Module made cheap to call and to read.

The model's math lives in llama.py; this is machinery. A small model's decode step makes ~55
module calls and ~120 attribute lookups around ops on a few numbers, so nn.Module's general paths
for both cost more than the math they wrap.
"""

from __future__ import annotations

from torch import nn


class Direct(nn.Module):
    """A module whose call runs `forward` at once, without nn.Module.__call__'s hook machinery.

    This model registers no hooks; at batch 1 that machinery was about a fifth of the model's time.
    Submodules and parameters are also plain instance attributes ("mirrors"): nn.Module keeps them
    only in _modules / _parameters, so `self.q_proj` falls back to nn.Module.__getattr__ (~2 µs,
    ~120 a decode step, a fifth of a batch-32 step). Every registry change (assignment, deletion,
    register_*, model.to()/half()) refreshes the mirror, so it is never stale; state_dict,
    parameters() and optimizers still go through the registries.
    """

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def _mirror(self, name: str) -> None:
        """Make self.__dict__[name] the registered parameter or submodule `name`, if any."""
        for registry in (self.__dict__.get("_parameters"), self.__dict__.get("_modules")):
            if registry is not None and name in registry:
                self.__dict__[name] = registry[name]
                return

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)
        self._mirror(name)

    def __delattr__(self, name: str) -> None:
        # a registered name leaves its registry; a plain attribute leaves __dict__
        super().__delattr__(name)
        self.__dict__.pop(name, None)

    def register_parameter(self, name: str, param: nn.Parameter | None) -> None:
        super().register_parameter(name, param)
        self._mirror(name)

    def add_module(self, name: str, module: nn.Module | None) -> None:
        super().add_module(name, module)
        self._mirror(name)

    def _apply(self, fn, recurse: bool = True):
        # model.to(), .half(), .cuda() may put new Parameter objects into the registry
        out = super()._apply(fn, recurse)
        for name in (*self._parameters, *self._modules):
            self._mirror(name)
        return out
