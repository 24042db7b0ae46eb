"""The closed loop on the diagnosis pages: the cluster page's section and the orders named
under a finding's capture plan on the trace page (hosts.closed_loop_page). Tags, so the
diagnosis views need not know the hosts app."""
from __future__ import annotations

from django import template

from hosts import closed_loop_page
from hosts.answered_order import answered_order

register = template.Library()


@register.inclusion_tag("hosts/partials/closed_loop_section.html", takes_context=True)
def closed_loop_section(context, cluster) -> dict:
    """The cluster page's "Closed loop" card, for a cluster whose rules declare a capture or
    that has orders."""
    return {"panel": closed_loop_page.panel(cluster, context["request"].user), "request": context["request"],
            "csrf_token": context.get("csrf_token")}


@register.simple_tag
def finding_orders(record, rule_id: str, trace_id: int) -> list:
    """The closed loop's orders for a finding on the trace page: its cluster's outstanding ones
    and those this trace made (`record`: the finding's ClusterRecord, None on a rule test)."""
    if not record:  # a rule test's findings have no cluster (and no `c` in the template)
        return []
    rows = closed_loop_page.orders_for_trace(trace_id, [record.pk]).get(record.pk, [])
    return [r for r in rows if r.order.rule_id == rule_id]


@register.inclusion_tag("hosts/partials/answered_order.html")
def answered_order_card(trace) -> dict:
    """On a capture's own trace page: the order it answered (hosts.answered_order)."""
    return {"answered": answered_order(trace), "trace": trace}
