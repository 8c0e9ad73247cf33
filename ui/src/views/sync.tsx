import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { call, get, type RemoveReport, type SyncStatus } from "../api";
import { ConfirmButton, Empty, ErrorView, Loading, fmtTime, useTitle } from "../ui";

/** A device id as people compare them: its first 8 hex digits (the full id is in the title). */
const short = (id: string) => id.slice(0, 8);

/** `/ui/sync`: this device's sync group (docs/sync.md): the folder, what is pending, the group key's rotations
 * and this device's compaction, and every other device with when it was last seen, what was applied from it,
 * the conflicts resolved, the last error, or that it was removed. Refreshed every
 * 5 s, as the daemon's sync worker moves. */
export function SyncView() {
  useTitle("Sync");
  const status = useQuery({
    queryKey: ["sync-status"],
    queryFn: () => get<SyncStatus>("/sync/status"),
    // Every 5 s, every 0.5 s while a pass applies segments (a first sync's progress bar).
    refetchInterval: (q) => (q.state.data?.progress.running ? 500 : 5000),
  });
  const qc = useQueryClient();
  // Removing a lost device: its later segments are refused everywhere and the group key rotates; the answer
  // carries the new pairing code, shown once.
  const remove = useMutation({
    mutationFn: (id: string) => call<RemoveReport>("DELETE", `/sync/devices/${id}`),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ["sync-status"] }),
  });
  const s = status.data;
  return (
    <section aria-labelledby="sync-title">
      <h1 id="sync-title">Sync</h1>
      <ErrorView error={status.error} />
      {status.isPending && <Loading />}
      {s && !s.enabled && (
        <Empty>
          This store is in no sync group. Start one with <code>engram sync init --folder DIR</code> (any synced folder: Syncthing,
          Dropbox, iCloud Drive, a share), join it from another device with <code>engram sync join --folder DIR --code …</code>,
          and run the daemon with <code>engram serve --sync</code>.
        </Empty>
      )}
      {s && s.enabled && (
        <>
          {s.error && (
            <p className="refused" role="alert">
              <strong>This device cannot sync any more:</strong> {s.error}
            </p>
          )}
          <dl className="facts">
            <dt>This device</dt>
            <dd title={s.device_id}>
              <code>{short(s.device_id)}</code>
            </dd>
            <dt>Folder</dt>
            <dd>{s.folder ? <code>{s.folder}</code> : "none (changes are logged, nothing is written)"}</dd>
            <dt>Pending</dt>
            <dd>{s.pending_changes === 0 ? "nothing: every change is in the folder" : `${s.pending_changes.toLocaleString("en-US")} changes not yet in the folder`}</dd>
            <dt>Changes logged</dt>
            <dd>{s.last_seq.toLocaleString("en-US")}</dd>
            <dt>Group key</dt>
            <dd>{s.key_epoch === 0 ? "the first (no device removed)" : `rotated ${s.key_epoch} time${s.key_epoch === 1 ? "" : "s"} (once per device removed)`}</dd>
            <dt>Compacted</dt>
            <dd>{s.snapshot === 0 ? "nothing yet" : `this device's segments up to ${s.snapshot.toLocaleString("en-US")}`}</dd>
            {s.progress.running && (
              <>
                <dt>Applying</dt>
                <dd>
                  <progress max={s.progress.segments_total || 1} value={s.progress.segments_done} aria-label="Segments applied" />{" "}
                  {s.progress.segments_done.toLocaleString("en-US")} of {s.progress.segments_total.toLocaleString("en-US")} segments
                </dd>
              </>
            )}
          </dl>
          <h2>Other devices</h2>
          <ErrorView error={remove.error} />
          {remove.data && (
            <div className="card" role="status">
              <p>
                Device <code>{short(remove.data.device_id)}</code> was removed: its segments after {remove.data.last_accepted_segment.toLocaleString("en-US")}{" "}
                are refused, and the group key was rotated (epoch {remove.data.epoch}) for the {remove.data.kept.length} device{remove.data.kept.length === 1 ? "" : "s"} kept. A device that joins from now
                on needs the new pairing code (keep it secret):
              </p>
              <p>
                <code>{remove.data.pairing_code}</code>
              </p>
            </div>
          )}
          {s.peers.length === 0 ? (
            <Empty>No other device has written to the folder yet.</Empty>
          ) : (
            <table className="list" aria-label="Devices">
              <thead>
                <tr>
                  <th scope="col">Device</th>
                  <th scope="col">Last seen</th>
                  <th scope="col">Segments applied</th>
                  <th scope="col">Changes applied</th>
                  <th scope="col">Conflicts resolved</th>
                  <th scope="col">State</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {s.peers.map((p) => (
                  <tr key={p.device_id} className={p.device_id in s.removed ? "removed" : undefined}>
                    <td title={p.device_id}>
                      <code>{short(p.device_id)}</code>
                    </td>
                    <td>{p.last_seen ? fmtTime(p.last_seen) : "never"}</td>
                    <td>{p.cursor.toLocaleString("en-US")}</td>
                    <td>{p.applied.toLocaleString("en-US")}</td>
                    <td>{p.conflicts.toLocaleString("en-US")}</td>
                    <td>
                      {p.device_id in s.removed ? (
                        `removed from the group: segments after ${(s.removed[p.device_id] ?? 0).toLocaleString("en-US")} refused`
                      ) : p.error ? (
                        <strong className="refused" role="alert">
                          refused: {p.error}
                        </strong>
                      ) : p.pending ? (
                        "its next segment is still being copied"
                      ) : (
                        "up to date"
                      )}
                    </td>
                    <td>
                      {!(p.device_id in s.removed) && (
                        <ConfirmButton
                          label="Remove"
                          confirm="Remove it for good?"
                          danger
                          disabled={remove.isPending}
                          onConfirm={() => remove.mutate(p.device_id)}
                        />
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </section>
  );
}
