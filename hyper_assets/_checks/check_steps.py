"""The library's unpartitioned checks as Dagster steps: each check a spec and the function
that evaluates it, and several checks of one asset run in one step."""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import dagster as dg

from hyper_assets._checks.stored_table import WARN
from hyper_assets._dagster.located import ExtractSource

CheckFunction = Callable[[dg.AssetCheckExecutionContext], dg.AssetCheckResult]


@dataclass(frozen=True)
class Check:
    """One check: its spec, and the function that evaluates it."""

    spec: dg.AssetCheckSpec
    evaluate: CheckFunction

    def result(self, context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        """The check's result, named for its spec; a failure is also logged at the default
        log level: an error, or a warning for a check of WARN severity."""
        result = self.evaluate(context)
        if not result.passed:
            warn = result.severity == WARN
            (context.log.warning if warn else context.log.error)(
                f"Check {self.spec.name} of {self.spec.asset_key.to_user_string()} failed: "
                f"{result.description}"
            )
        return dg.AssetCheckResult(
            asset_key=self.spec.asset_key,
            check_name=self.spec.name,
            passed=result.passed,
            severity=result.severity,
            description=result.description,
            metadata=result.metadata,
        )


def step(name: str, checks: Sequence[Check], source: ExtractSource) -> dg.AssetChecksDefinition:
    """`checks` as one step (op `name`): one process, one hyperd, for all of them.

    A run may select some of them; each failure is its own result, and an error (a
    missing table, say) fails the step after the checks before it have reported.
    """

    @dg.multi_asset_check(
        specs=[c.spec for c in checks],
        name=name,
        can_subset=True,
        required_resource_keys={source.resource_key},
    )
    def _run(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        for check in checks:
            if check.spec.key in context.selected_asset_check_keys:
                yield check.result(context)

    return _run


def single(check: Check, source: ExtractSource) -> dg.AssetChecksDefinition:
    """`check` as a step of its own (op `<asset>_<check>`)."""
    name = f"{check.spec.asset_key.to_python_identifier()}_{check.spec.name}"
    return step(name, [check], source)
