"""Every number setting of `optimize`, `aoptimize` and `align_judge` refuses NaN and infinity by name
(a whole-number setting as "must be an integer"), before any model is asked (audit 4, M5:
`max_calls=nan` and `max_cost_usd=nan` were accepted and, every comparison with NaN being false,
the run was uncapped)."""

from __future__ import annotations

import asyncio
import math

import pytest
from _world import World

import judgehooks

pytest.importorskip("gepa")

BAD = [math.nan, math.inf, -math.inf]
OPTIMIZE = ("max_metric_calls", "holdout", "seed", "max_cost_usd", "max_calls", "concurrency", "minibatch_size",
            "timeout")
ALIGN = ("max_metric_calls", "holdout", "seed", "max_cost_usd", "max_calls", "concurrency", "resamples",
         "few_shot", "timeout")


def _optimize(world: World, **settings):
    return judgehooks.optimize(world.agent(), world.cases(20), evaluators=[world.judge()],
                               reflection_model="openai/reflect", api_base=world.server.base_url, api_key="k",
                               **settings)


def _asked(world: World) -> int:
    return len(world.reflection_prompts) + len(world.agent_system_prompts) + world.judge_calls


@pytest.mark.parametrize("value", BAD, ids=str)
@pytest.mark.parametrize("setting", OPTIMIZE)
def test_optimize_refuses_a_non_finite_number_setting_by_name_before_any_call(server, setting, value):
    world = World(server)
    with pytest.raises(ValueError, match=rf"^{setting} must be (a finite number|an integer).*, got -?(nan|inf)"):
        _optimize(world, **{setting: value})
    assert _asked(world) == 0


@pytest.mark.parametrize("setting", ["max_calls", "max_cost_usd", "timeout"])
def test_aoptimize_refuses_nan_by_name_too(server, setting):
    world = World(server)

    async def main():
        return await judgehooks.aoptimize(world.agent(), world.cases(20), evaluators=[world.judge()],
                                          reflection_model="openai/reflect", api_base=server.base_url,
                                          api_key="k", **{setting: math.nan})

    with pytest.raises(ValueError, match=rf"^{setting} must be (a finite number|an integer).*, got nan"):
        asyncio.run(main())
    assert _asked(world) == 0


@pytest.mark.parametrize("value", BAD, ids=str)
@pytest.mark.parametrize("setting", ALIGN)
def test_align_judge_refuses_a_non_finite_number_setting_by_name_before_any_call(server, setting, value):
    world = World(server)
    labels = [{"input": f"q{i}", "output": f"a{i}", "passed": i % 2 == 0} for i in range(12)]
    with pytest.raises(ValueError, match=rf"^{setting} must be (a finite number|an integer).*, got -?(nan|inf)"):
        judgehooks.align_judge(world.judge(), labels, reflection_model="openai/reflect", api_base=server.base_url,
                               api_key="k", **{setting: value})
    assert _asked(world) == 0


@pytest.mark.parametrize(("setting", "value", "message"), [
    ("max_calls", 0, "max_calls must be an integer > 0"),
    ("max_calls", 2.5, "max_calls must be an integer > 0"),
    ("max_cost_usd", -1.0, "max_cost_usd must be a number > 0"),
    ("max_metric_calls", True, "max_metric_calls must be an integer >= 1"),
    ("holdout", 1.5, "holdout must be a number > 0 and <= 1"),
    ("timeout", 0, "timeout must be a number > 0"),
    ("seed", "7", "seed must be an integer"),
])
def test_out_of_range_settings_are_refused_by_name(server, setting, value, message):
    world = World(server)
    with pytest.raises(ValueError, match=f"^{message}, got"):
        _optimize(world, **{setting: value})
    assert _asked(world) == 0
