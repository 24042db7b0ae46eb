"""SQL for each Nsight Systems export table we read, over export schemas 2.x and 3.x.

Every query yields the same base columns (ts, dur, name, pid, tid, device, stream, corr,
value, rid) plus per-table attribute columns; `nsys.export` turns them into events.
Timestamps in the export are ns since the session start (TARGET_INFO_SESSION_START_TIME).
globalTid/globalPid pack the ids: pid = (g >> 24) & 0xFFFFFF, tid = g & 0xFFFFFF; a
runtime call belongs to the process `globalTid & 0xFFFFFFFFFF000000` (nsys's own reports
join CUDA API rows to GPU rows on that, so equal correlation ids of two processes never mix).
"""
from __future__ import annotations

from dataclasses import dataclass, field

PID = "(({g} >> 24) & 16777215)"
TID = "({g} & 16777215)"
PROCESS_MASK = "-16777216"  # 0xFFFFFFFFFF000000 as a signed 64-bit literal

# Fallbacks when the export has no ENUM_* tables (schema 2.x)
MEM_KIND = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
            5: "Device Static", 6: "Managed Static", 7: "Unknown"}
MEMCPY_OPER = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
               7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}
SYNC_TYPE = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync",
             4: "Context sync"}
NVTX_RANGES = (59, 60)   # NvtxPushPopRange, NvtxStartEndRange
NVTX_MARK = 34
NO_STREAM = 4294967295   # CUPTI's "no stream / no event" (uint32 -1)


@dataclass
class TableQuery:
    table: str
    kind: str
    sql: str
    attrs: list[str] = field(default_factory=list)


def _name(col: str) -> str:
    return f"(SELECT value FROM StringIds WHERE id = {col})"


def queries(columns: dict[str, set[str]]) -> list[TableQuery]:
    """Queries for the tables present; `columns` maps table -> its column names.

    Long on purpose: one branch per table family, each a SQL text with the columns that export
    version has; read top to bottom they are the whole mapping of an nsys export to events."""
    out: list[TableQuery] = []

    def has(table: str, *cols: str) -> bool:
        return table in columns and all(c in columns[table] for c in cols)

    def opt(table: str, col: str, alias: str | None = None) -> str:
        alias = alias or col
        return f"t.{col} AS {alias}" if col in columns.get(table, ()) else f"NULL AS {alias}"

    runtime = "CUPTI_ACTIVITY_KIND_RUNTIME"
    kernel = "CUPTI_ACTIVITY_KIND_KERNEL"
    if has(kernel, "start", "end", "demangledName"):
        launch = ""
        host = "-1 AS tid"
        if has(runtime, "correlationId", "globalTid"):
            # one launching thread per (process, correlation id): 2.x exports hold the
            # API call twice (cudaMalloc and its nested cudaMalloc_v3020)
            launch = (f"LEFT JOIN (SELECT correlationId, MIN(globalTid) AS globalTid FROM {runtime} "
                      f"GROUP BY correlationId, globalTid & {PROCESS_MASK}) r "
                      f"ON r.correlationId = t.correlationId "
                      f"AND (r.globalTid & {PROCESS_MASK}) = t.globalPid")
            host = f"{TID.format(g='r.globalTid')} AS tid"
        attrs = ["short_name", "grid", "block", "registers_per_thread", "static_shared_memory",
                 "dynamic_shared_memory", "graph_node_id", "context"]
        out.append(TableQuery(kernel, "kernel", f"""
            SELECT t.start AS ts, t.end - t.start AS dur, {_name('t.demangledName')} AS name,
                   {PID.format(g='t.globalPid')} AS pid, {host}, t.deviceId AS device,
                   t.streamId AS stream, t.correlationId AS corr, NULL AS value, t.rowid AS rid,
                   {_name('t.shortName')} AS short_name,
                   '[' || t.gridX || ',' || t.gridY || ',' || t.gridZ || ']' AS grid,
                   '[' || t.blockX || ',' || t.blockY || ',' || t.blockZ || ']' AS block,
                   t.registersPerThread AS registers_per_thread,
                   t.staticSharedMemory AS static_shared_memory,
                   t.dynamicSharedMemory AS dynamic_shared_memory,
                   {opt(kernel, 'graphNodeId', 'graph_node_id')}, t.contextId AS context
            FROM {kernel} t {launch}""", attrs))
    if has(runtime, "start", "end", "nameId", "globalTid"):
        out.append(TableQuery(runtime, "runtime", f"""
            SELECT t.start AS ts, t.end - t.start AS dur, {_name('t.nameId')} AS name,
                   {PID.format(g='t.globalTid')} AS pid, {TID.format(g='t.globalTid')} AS tid,
                   -1 AS device, -1 AS stream, t.correlationId AS corr, NULL AS value,
                   t.rowid AS rid, t.returnValue AS return_value,
                   {opt(runtime, 'eventClass', 'event_class')}
            FROM {runtime} t""", ["return_value", "event_class"]))
    memcpy = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if has(memcpy, "start", "end", "bytes", "copyKind"):
        out.append(TableQuery(memcpy, "memcpy", f"""
            SELECT t.start AS ts, t.end - t.start AS dur, '' AS name,
                   {PID.format(g='t.globalPid')} AS pid, -1 AS tid, t.deviceId AS device,
                   t.streamId AS stream, t.correlationId AS corr, NULL AS value, t.rowid AS rid,
                   t.bytes AS bytes, t.copyKind AS copy_kind_id, {opt(memcpy, 'srcKind', 'src_kind_id')},
                   {opt(memcpy, 'dstKind', 'dst_kind_id')}, {opt(memcpy, 'graphNodeId', 'graph_node_id')}
            FROM {memcpy} t""", ["bytes", "copy", "src_kind", "dst_kind", "memcpy_kind",
                                 "graph_node_id"]))
    memset = "CUPTI_ACTIVITY_KIND_MEMSET"
    if has(memset, "start", "end", "bytes"):
        out.append(TableQuery(memset, "memset", f"""
            SELECT t.start AS ts, t.end - t.start AS dur, 'Memset' AS name,
                   {PID.format(g='t.globalPid')} AS pid, -1 AS tid, t.deviceId AS device,
                   t.streamId AS stream, t.correlationId AS corr, NULL AS value, t.rowid AS rid,
                   t.bytes AS bytes, {opt(memset, 'value', 'fill_value')},
                   {opt(memset, 'memKind', 'mem_kind_id')}
            FROM {memset} t""", ["bytes", "fill_value", "mem_kind"]))
    sync = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    if has(sync, "start", "end", "syncType"):
        out.append(TableQuery(sync, "sync", f"""
            SELECT t.start AS ts, t.end - t.start AS dur, '' AS name,
                   {PID.format(g='t.globalPid')} AS pid, -1 AS tid, t.deviceId AS device,
                   CASE WHEN t.streamId = {NO_STREAM} THEN -1 ELSE t.streamId END AS stream,
                   t.correlationId AS corr, NULL AS value, t.rowid AS rid,
                   t.syncType AS sync_type_id
            FROM {sync} t""", ["sync_type"]))
    nvtx = "NVTX_EVENTS"
    if has(nvtx, "start", "end", "eventType", "globalTid"):
        text = "COALESCE(t.text, " + _name("t.textId") + ")" if "textId" in columns[nvtx] else "t.text"
        out.append(TableQuery(nvtx, "annotation", f"""
            SELECT t.start AS ts, COALESCE(t.end - t.start, 0) AS dur, COALESCE({text}, '') AS name,
                   {PID.format(g='t.globalTid')} AS pid, {TID.format(g='t.globalTid')} AS tid,
                   -1 AS device, -1 AS stream, -1 AS corr, NULL AS value, t.rowid AS rid,
                   t.eventType AS event_type, {opt(nvtx, 'domainId', 'domain_id')},
                   {opt(nvtx, 'rangeId', 'range_id')}
            FROM {nvtx} t WHERE t.eventType IN ({NVTX_MARK}, {', '.join(map(str, NVTX_RANGES))})""",
            ["event_type", "domain_id", "range_id"]))
    osrt = "OSRT_API"
    if has(osrt, "start", "end", "nameId", "globalTid"):
        out.append(TableQuery(osrt, "cpu_op", f"""
            SELECT t.start AS ts, t.end - t.start AS dur, {_name('t.nameId')} AS name,
                   {PID.format(g='t.globalTid')} AS pid, {TID.format(g='t.globalTid')} AS tid,
                   -1 AS device, -1 AS stream, -1 AS corr, NULL AS value, t.rowid AS rid,
                   'os_runtime' AS api, t.returnValue AS return_value
            FROM {osrt} t""", ["api", "return_value"]))
    gpu_mem = "CUDA_GPU_MEMORY_USAGE_EVENTS"
    if has(gpu_mem, "start", "bytes", "memoryOperationType"):
        out.append(TableQuery(gpu_mem, "alloc", f"""
            SELECT t.start AS ts, 0 AS dur, 'cuda_memory' AS name,
                   {PID.format(g='t.globalPid')} AS pid, -1 AS tid, t.deviceId AS device,
                   -1 AS stream, COALESCE(t.correlationId, -1) AS corr,
                   CASE WHEN t.memoryOperationType = 1 THEN -t.bytes ELSE t.bytes END AS value,
                   t.rowid AS rid, t.bytes AS bytes, t.memoryOperationType AS operation,
                   {opt(gpu_mem, 'memKind', 'mem_kind_id')}, {opt(gpu_mem, 'address')}
            FROM {gpu_mem} t""", ["bytes", "operation", "mem_kind", "address"]))
    return out
