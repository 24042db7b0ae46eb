"""`/api/v1/traces/`: the project puts the layers of the traces API together (ingest's upload,
list and detail; diagnosis's report and findings) and receives an agent's bundle once per
`Idempotency-Key` (hosts.receipts), which neither app below hosts may import."""
from __future__ import annotations

from rest_framework.routers import SimpleRouter

from diagnosis.api.traces import DiagnosedTraceViewSet
from hosts.receipts import receive_once


class TraceViewSet(DiagnosedTraceViewSet):
    receive = staticmethod(receive_once)


router = SimpleRouter()
router.register("traces", TraceViewSet, basename="trace")
urlpatterns = router.urls
