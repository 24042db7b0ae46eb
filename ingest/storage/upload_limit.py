"""Stops an upload that passes TRACEDOC_MAX_UPLOAD_BYTES while it streams in."""
from __future__ import annotations

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload


class SizeLimitUploadHandler(FileUploadHandler):
    """Stops an upload as soon as it exceeds TRACEDOC_MAX_UPLOAD_BYTES (all files together).

    FILE_UPLOAD_MAX_MEMORY_SIZE is only a spill-to-disk threshold, not a cap. The view
    answers 413 when it sees `request.upload_too_large`.
    """

    def __init__(self, request=None):
        super().__init__(request)
        self.limit = settings.TRACEDOC_MAX_UPLOAD_BYTES
        self.received = 0

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.received = 0
        if content_length and content_length > self.limit:
            self._refuse()

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > self.limit or getattr(self.request, "upload_too_large", False):
            self._refuse()
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size):
        return None

    def _refuse(self) -> None:
        if self.request is not None:
            self.request.upload_too_large = True
