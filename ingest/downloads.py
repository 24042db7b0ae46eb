"""An artifact's stored bytes, downloaded from the trace page: team-scoped (another team's
trace is a 404), streamed from the content store in chunks, always as an attachment under
the file's own name (never rendered by the browser). An archive's members are not stored on
their own: the archive is the download."""
from __future__ import annotations

from pathlib import PurePosixPath

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from ingest.models import Artifact
from ingest.storage import ContentStore
from ingest.views import get_trace_for


@login_required
@require_GET
def artifact_download(request, trace_id: int, artifact_id: int):
    trace = get_trace_for(request, trace_id)
    artifact = get_object_or_404(Artifact, trace=trace, pk=artifact_id)
    store = ContentStore()  # a local folder or S3: the bytes stream from it either way
    if artifact.parent_id is not None or not store.exists(artifact.sha256):
        raise Http404(f"{artifact.name} is not stored on its own; download the archive it came in")
    response = FileResponse(store.open_blob(artifact.sha256), as_attachment=True,
                            filename=PurePosixPath(artifact.name).name,
                            content_type="application/octet-stream")
    response["X-Content-Type-Options"] = "nosniff"
    return response
