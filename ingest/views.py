"""Web pages for traces: list, upload and the progress partial (the trace page, which shows the
diagnosis, is diagnosis/trace_page.py)."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRefresh

from ingest.forms import UploadForm
from ingest.models import Trace
from ingest.uploads import QuotaExceeded, StorageFull, create_trace, team_for_upload

LIST_LIMIT = 200


def get_trace_for(request, trace_id: int) -> Trace:
    """The tenancy choke point of the trace pages: another team's trace is a 404."""
    return get_object_or_404(Trace.objects.visible_to(request.user).select_related("team"), pk=trace_id)


@login_required
@require_GET
def trace_list(request):
    traces = (Trace.objects.visible_to(request.user).select_related("team").listed()
              .prefetch_related("artifacts"))
    if state := request.GET.get("state"):
        traces = traces.filter(state=state)
    traces = list(traces[:LIST_LIMIT])
    context = {"traces": traces, "polling": any(not t.finished for t in traces),
               "states": Trace.State.values, "state": state}
    template = "ingest/partials/trace_rows.html" if request.htmx else "ingest/trace_list.html"
    return render(request, template, context)


@login_required
def trace_upload(request):
    if getattr(request, "upload_too_large", False):
        return HttpResponse(f"Upload larger than {settings.TRACEDOC_MAX_UPLOAD_BYTES:,} bytes.", status=413)
    form = UploadForm(request.POST or None, request.FILES or None, user=request.user)
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            team = team_for_upload(request.user, data["team"].slug if data["team"] else None, data["labels"])
            trace = create_trace(team, request.user, data["files"], name=data["name"], labels=data["labels"])
        except ValidationError as e:
            form.add_error(None, e)
            status = 413 if isinstance(e, QuotaExceeded) else 200  # the page shows why
        except StorageFull as e:
            form.add_error(None, str(e))
            status = 507
        else:
            return redirect("ingest:trace-detail", trace.pk)
    return render(request, "ingest/trace_upload.html", {"form": form}, status=status)


@login_required
@require_GET
def trace_progress(request, trace_id: int):
    """Polled by the trace page while the trace is being worked on; once it is finished
    the page reloads to show the diagnosis."""
    trace = get_trace_for(request, trace_id)
    if trace.finished and request.htmx:
        return HttpResponseClientRefresh()
    return render(request, "ingest/partials/progress.html", {"trace": trace})
