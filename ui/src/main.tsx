import { StrictMode, Suspense, lazy, useEffect, useState, type FormEvent } from "react";
import { createRoot } from "react-dom/client";
import { QueryClient, QueryClientProvider, useQuery, useQueryClient } from "@tanstack/react-query";
import { BrowserRouter, NavLink, Navigate, Route, Routes, useLocation, useNavigate, useSearchParams } from "react-router";
import { ApiError, OfflineError, call, get, onConnection, setConnection, type ConnectionState, type Space } from "./api";
import { ErrorView, useAutoFocus } from "./ui";
import { SearchView } from "./views/search";
import { MemoriesView, MemoryDetail } from "./views/memories";
import { ThreadsView, ThreadDetail } from "./views/threads";
import { LibraryView, SourceDetail, WikiPage } from "./views/library";
import { ReviewsView } from "./views/reviews";
import { LabelsView } from "./views/labels";
import { SpacesView } from "./views/spaces";
import { WorkingMemoryView } from "./views/working";
import { SyncView } from "./views/sync";
import { SystemView } from "./views/system";
import "./styles.css";

// The graph view brings sigma.js and graphology: loaded when first opened, not with the shell.
const GraphView = lazy(() => import("./views/graph").then((m) => ({ default: m.GraphView })));

/** How often open views ask again for what an agent may have changed meanwhile: 5 s. */
export const POLL_MS = 5000;

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      refetchInterval: POLL_MS,
      refetchOnWindowFocus: true,
      staleTime: 1000,
      retry: (n, e) => !(e instanceof ApiError) && n < 2,
    },
  },
});

const NAV: [string, string][] = [
  ["search", "Search"],
  ["memories", "Memories"],
  ["threads", "Threads"],
  ["graph", "Graph"],
  ["library", "Library"],
  ["reviews", "Reviews"],
  ["labels", "Labels"],
  ["spaces", "Spaces"],
  ["working-memory", "Working memory"],
  ["sync", "Sync"],
  ["system", "System"],
];

function SpaceSwitcher() {
  const [params, setParams] = useSearchParams();
  const spaces = useQuery({ queryKey: ["spaces"], queryFn: () => get<{ spaces: Space[] }>("/spaces") });
  const current = params.get("space") || "default";
  return (
    <label className="space-switcher">
      <span>Space</span>
      <select
        aria-label="Space"
        value={current}
        onChange={(e) => {
          const next = new URLSearchParams(params);
          if (e.target.value === "default") next.delete("space");
          else next.set("space", e.target.value);
          next.delete("offset");
          setParams(next);
        }}
      >
        {(spaces.data?.spaces ?? [{ id: "default", name: "Default" } as Space]).map((s) => (
          <option key={s.id} value={s.id}>
            {s.name || s.id}
          </option>
        ))}
      </select>
    </label>
  );
}

function Header({ onSignOut }: { onSignOut: () => void }) {
  const [params] = useSearchParams();
  const space = params.get("space");
  const keep = space ? `?space=${encodeURIComponent(space)}` : "";
  return (
    <header className="top">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <span className="brand">Engram</span>
      <nav aria-label="Views">
        {NAV.map(([path, label]) => (
          <NavLink key={path} to={`/${path}${keep}`}>
            {label}
          </NavLink>
        ))}
      </nav>
      <SpaceSwitcher />
      <button type="button" className="link" onClick={onSignOut}>
        Sign out
      </button>
    </header>
  );
}

function SignIn({ onSignedIn, error }: { onSignedIn: () => void; error?: unknown }) {
  const [key, setKey] = useState("");
  const [failure, setFailure] = useState<unknown>(error);
  const [busy, setBusy] = useState(false);
  const ref = useAutoFocus<HTMLInputElement>();
  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    try {
      await call("POST", "/ui/session", { body: { key } });
      setKey("");
      onSignedIn();
    } catch (err) {
      setFailure(err);
    } finally {
      setBusy(false);
    }
  }
  return (
    <main className="signin" id="main">
      <h1>Engram</h1>
      <form onSubmit={submit}>
        <label htmlFor="api-key">API key</label>
        <input
          id="api-key"
          ref={ref}
          type="password"
          autoComplete="current-password"
          value={key}
          onChange={(e) => setKey(e.target.value)}
          required
        />
        <button type="submit" disabled={busy || key.length === 0}>
          Sign in
        </button>
      </form>
      <ErrorView error={failure} />
      <p className="muted">
        The key is in <code>api-key</code> in the daemon's data directory. <code>engram ui</code> prints a one-time
        sign-in link instead.
      </p>
    </main>
  );
}

function Banner({ state }: { state: ConnectionState }) {
  if (state !== "offline") return null;
  return (
    <div className="banner" role="alert">
      The daemon went away. Reconnecting…
    </div>
  );
}

type Auth = "checking" | "in" | "out";

function App() {
  const [auth, setAuth] = useState<Auth>("checking");
  const [authError, setAuthError] = useState<unknown>();
  const [conn, setConn] = useState<ConnectionState>("online");
  const qc = useQueryClient();
  const navigate = useNavigate();
  const location = useLocation();

  useEffect(() => onConnection(setConn), []);
  useEffect(() => {
    if (conn === "signed-out" && auth === "in") {
      qc.clear();
      setAuth("out");
    }
  }, [conn, auth, qc]);

  // A one-time token arrives in the URL fragment (`#token=...`): redeem it, then drop it from the address bar
  // and the history, so it is never bookmarked, shared or replayed.
  useEffect(() => {
    const m = /(?:^|[#&])token=([0-9a-fA-F]+)/.exec(window.location.hash);
    const check = async () => {
      if (m) {
        history.replaceState(null, "", window.location.pathname + window.location.search);
        try {
          await call("POST", "/ui/session", { body: { token: m[1] } });
        } catch (e) {
          setAuthError(e);
        }
      }
      try {
        await call("GET", "/ui/session");
        setConnection("online");
        setAuth("in");
      } catch (e) {
        if (e instanceof OfflineError) setAuthError(e);
        setAuth("out");
      }
    };
    void check();
  }, []);

  // While the daemon is away, probe it every 2 s and refresh everything once it is back.
  useEffect(() => {
    if (conn !== "offline") return;
    const t = window.setInterval(async () => {
      try {
        const r = await fetch("/livez", { credentials: "same-origin" });
        if (r.ok) {
          setConnection("online");
          void qc.invalidateQueries();
        }
      } catch {
        // Still away.
      }
    }, 2000);
    return () => window.clearInterval(t);
  }, [conn, qc]);

  if (auth === "checking") return <p className="muted">Loading…</p>;
  if (auth === "out")
    return (
      <SignIn
        error={authError}
        onSignedIn={() => {
          setConnection("online");
          setAuth("in");
          if (location.pathname === "/") navigate("/search");
        }}
      />
    );

  async function signOut() {
    try {
      await call("DELETE", "/ui/session");
    } finally {
      qc.clear();
      setAuth("out");
    }
  }

  return (
    <>
      <Header onSignOut={signOut} />
      <Banner state={conn} />
      <main id="main" tabIndex={-1}>
        <Routes>
          <Route path="/" element={<Navigate to="/search" replace />} />
          <Route path="/search" element={<SearchView />} />
          <Route path="/memories" element={<MemoriesView />} />
          <Route path="/memories/:id" element={<MemoryDetail />} />
          <Route path="/threads" element={<ThreadsView />} />
          <Route path="/threads/:id" element={<ThreadDetail />} />
          <Route
            path="/graph"
            element={
              <Suspense fallback={<p className="muted">Loading…</p>}>
                <GraphView />
              </Suspense>
            }
          />
          <Route path="/library" element={<LibraryView />} />
          <Route path="/library/sources/:id" element={<SourceDetail />} />
          <Route path="/library/wiki/:kind/:id" element={<WikiPage />} />
          <Route path="/reviews" element={<ReviewsView />} />
          <Route path="/labels" element={<LabelsView />} />
          <Route path="/spaces" element={<SpacesView />} />
          <Route path="/working-memory" element={<WorkingMemoryView />} />
          <Route path="/sync" element={<SyncView />} />
          <Route path="/system" element={<SystemView />} />
          <Route path="*" element={<p>No such page.</p>} />
        </Routes>
      </main>
    </>
  );
}

const root = document.getElementById("root");
if (root) {
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={queryClient}>
        <BrowserRouter basename="/ui">
          <App />
        </BrowserRouter>
      </QueryClientProvider>
    </StrictMode>,
  );
}
