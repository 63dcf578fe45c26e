"""Per-account daily LLM budgets: tokens and cost over the turns stored today (UTC).

The defaults come from the settings (``DAILY_TOKEN_BUDGET``, ``DAILY_COST_BUDGET``; 0 means no limit); an
account's ``UserBudget`` overrides either (empty: the default, 0: no limit for that account). Every LLM call of
every strategy passes the session's gate first (``agent.llm.gate``): the call is refused when what the account
used today plus what this call may use (its prompt, counted with the tokenizer, plus its ``max_tokens``; their
price for the cost) would pass the budget. Sessions of one account running at the same moment each see the
others' stored turns, not their calls in flight, so together they may pass the budget by those calls.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import F, Sum
from django.utils import timezone

from agent.conf import agent_settings
from agent.llm import CallRefused, Message, PlannedCall, PriceTable
from agent.llm.tokens import count_tokens
from agent.models import Turn, UserBudget

BUDGET_REACHED = "Daily budget reached"


@dataclass(frozen=True)
class Budget:
    """Limits per UTC day; None: no limit."""

    tokens: int | None
    cost: float | None
    own: bool = False  # the account's own budget (UserBudget) rather than the defaults


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget
    tokens_used: int
    cost_used: float
    day_start: dt.datetime
    resets_at: dt.datetime

    @property
    def tokens_left(self) -> int | None:
        return None if self.budget.tokens is None else max(0, self.budget.tokens - self.tokens_used)

    @property
    def cost_left(self) -> float | None:
        return None if self.budget.cost is None else max(0.0, self.budget.cost - self.cost_used)

    def to_dict(self) -> dict:
        return {"tokens_per_day": self.budget.tokens, "cost_per_day": self.budget.cost,
                "own_budget": self.budget.own, "tokens_used_today": self.tokens_used,
                "cost_used_today": round(self.cost_used, 6), "tokens_left": self.tokens_left,
                "cost_left": None if self.cost_left is None else round(self.cost_left, 6),
                "day_start": self.day_start.isoformat(), "resets_at": self.resets_at.isoformat()}


def _limit(value) -> float | None:
    return None if value is None or value <= 0 else value


def budget_for(user) -> Budget:
    """The account's limits: its own where set, the settings' defaults for the rest."""
    tokens = int(agent_settings.DAILY_TOKEN_BUDGET or 0)
    cost = float(agent_settings.DAILY_COST_BUDGET or 0)
    own = UserBudget.objects.filter(user=user).first() if user is not None and user.pk else None
    if own is not None:
        if own.tokens_per_day is not None:
            tokens = own.tokens_per_day
        if own.cost_per_day is not None:
            cost = float(own.cost_per_day)
    return Budget(tokens=int(_limit(tokens)) if _limit(tokens) else None, cost=_limit(cost), own=own is not None)


def utc_day_start(now: dt.datetime | None = None) -> dt.datetime:
    now = (now or timezone.now()).astimezone(dt.UTC)
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def usage_today(user, *, now: dt.datetime | None = None) -> tuple[int, float]:
    """(tokens, cost) of the account's turns stored since midnight UTC, its runs' sessions included."""
    if user is None or not user.pk:
        return 0, 0.0
    totals = Turn.objects.filter(session__billed_to=user, created_at__gte=utc_day_start(now)).aggregate(
        tokens=Sum(F("prompt_tokens") + F("completion_tokens")), cost=Sum("cost"))
    return int(totals["tokens"] or 0), float(totals["cost"] or 0.0)


def budget_status(user, *, now: dt.datetime | None = None, budget: Budget | None = None) -> BudgetStatus:
    """Today's use against the account's limits (``budget``: those limits, when the caller read them already)."""
    start = utc_day_start(now)
    tokens, cost = usage_today(user, now=now)
    return BudgetStatus(budget=budget or budget_for(user), tokens_used=tokens, cost_used=cost, day_start=start,
                        resets_at=start + dt.timedelta(days=1))


def budget_status_if_limited(user) -> BudgetStatus | None:
    """Today's use when the account has a limit (None without one: nothing to add up)."""
    if user is None or not user.pk:
        return None
    budget = budget_for(user)
    if budget.tokens is None and budget.cost is None:
        return None
    return budget_status(user, budget=budget)


def budget_used_up(user) -> str | None:
    """Why ``user`` may start nothing more today (their budget is spent), or None."""
    budget = budget_for(user)
    if budget.tokens is None and budget.cost is None:
        return None  # no limit: no need to add up today's turns
    status = budget_status(user, budget=budget)
    if status.tokens_left == 0:
        return (f"{BUDGET_REACHED}: {status.tokens_used} of {status.budget.tokens} tokens used today (UTC); "
                f"it resets at midnight UTC.")
    if status.cost_left is not None and status.cost_left <= 0:
        return (f"{BUDGET_REACHED}: {status.cost_used:.4f} of {status.budget.cost:.4f} spent today (UTC); "
                f"it resets at midnight UTC.")
    return None


def planned_tokens(call: PlannedCall) -> tuple[int, int]:
    """(prompt, completion) tokens this call may use at most: its prompt counted, its ``max_tokens``."""
    prompt = sum(count_tokens(m.content if isinstance(m, Message) else str(m["content"])) + 4
                 for m in call.messages)
    return prompt, max(0, int(call.max_tokens or 0))


def check_budget(*, user, call: PlannedCall, prices: PriceTable, model: str) -> None:
    """Raise ``CallRefused`` ("Daily budget reached ...") when this call could take the account past its budget."""
    if user is None or not user.pk:
        return  # no account: sessions started by trusted operator tools
    budget = budget_for(user)
    if budget.tokens is None and budget.cost is None:
        return
    used_tokens, used_cost = usage_today(user)
    prompt, completion = planned_tokens(call)
    if budget.tokens is not None and used_tokens + prompt + completion > budget.tokens:
        raise CallRefused(f"{BUDGET_REACHED}: {used_tokens} of {budget.tokens} tokens used today (UTC); this call "
                          f"may use up to {prompt + completion} more. It resets at midnight UTC.")
    if budget.cost is not None:
        # A model without a price counts nothing against the cost budget (README: price your endpoints).
        planned = prices.cost(call.model or model, prompt, completion) or 0.0
        if used_cost + planned > budget.cost:
            raise CallRefused(f"{BUDGET_REACHED}: {used_cost:.4f} of {budget.cost:.4f} spent today (UTC); this "
                              f"call may cost up to {planned:.4f} more. It resets at midnight UTC.")


def budget_set(*, user, tokens_per_day: int | None, cost_per_day: Decimal | float | None) -> UserBudget:
    """Give ``user`` their own limits (None: the default, 0: no limit)."""
    budget, _ = UserBudget.objects.update_or_create(
        user=user, defaults={"tokens_per_day": tokens_per_day,
                             "cost_per_day": None if cost_per_day is None else Decimal(str(cost_per_day))})
    return budget
