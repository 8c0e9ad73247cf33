// Small pieces every view shares: loading, empty and error states, confirmation, highlighting, markdown.
import { useEffect, useRef, useState, type ReactNode } from "react";
import Markdown, { defaultUrlTransform } from "react-markdown";
import { Link, useSearchParams } from "react-router";
import { ApiError, OfflineError, fieldText } from "./api";

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <p className="muted" role="status" aria-live="polite">
      {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

/** An error as a person reads it: the message, and each field of a 422 by name. */
export function ErrorView({ error }: { error: unknown }) {
  if (!error) return null;
  if (error instanceof ApiError) {
    return (
      <div className="error" role="alert">
        <strong>{error.status === 422 ? "Please check the input" : `Error ${error.status}`}</strong>
        {error.fields.length > 0 ? (
          <ul>
            {error.fields.map((f, i) => (
              <li key={i}>{fieldText(f)}</li>
            ))}
          </ul>
        ) : (
          <span> {error.message}</span>
        )}
      </div>
    );
  }
  if (error instanceof OfflineError) {
    return (
      <div className="error" role="alert">
        The daemon does not answer; the console retries on its own.
      </div>
    );
  }
  return (
    <div className="error" role="alert">
      {error instanceof Error ? error.message : String(error)}
    </div>
  );
}

/** A button that asks before it acts: the first press arms it, the second (within 5 s) confirms. */
export function ConfirmButton({
  label,
  confirm,
  onConfirm,
  disabled,
  danger,
}: {
  label: string;
  confirm: string;
  onConfirm: () => void;
  disabled?: boolean;
  danger?: boolean;
}) {
  const [armed, setArmed] = useState(false);
  useEffect(() => {
    if (!armed) return;
    const t = window.setTimeout(() => setArmed(false), 5000);
    return () => window.clearTimeout(t);
  }, [armed]);
  return (
    <button
      type="button"
      className={danger || armed ? "danger" : undefined}
      disabled={disabled}
      onClick={() => {
        if (armed) {
          setArmed(false);
          onConfirm();
        } else setArmed(true);
      }}
    >
      {armed ? confirm : label}
    </button>
  );
}

function escapeRegExp(s: string) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Words of a query worth marking: three letters or more, or any number. */
export function queryTerms(q: string): string[] {
  return Array.from(new Set(q.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((t) => t.length >= 3 || /\d/.test(t))));
}

/** `text` with the terms marked (`<mark>`), prefix matches included ("flight" marks "flights"); text only. */
export function Highlight({ text, terms }: { text: string; terms: string[] }) {
  if (terms.length === 0) return <>{text}</>;
  const re = new RegExp(`(${terms.map(escapeRegExp).join("|")})`, "giu");
  const parts = text.split(re);
  return (
    <>
      {parts.map((p, i) => (i % 2 === 1 ? <mark key={i}>{p}</mark> : p))}
    </>
  );
}

interface MdNode {
  type: string;
  value?: string;
  children?: MdNode[];
}

/** A remark plugin: raw HTML in markdown becomes plain text, so it shows literally and never runs. */
function htmlAsText() {
  const walk = (n: MdNode) => {
    if (n.type === "html") n.type = "text";
    n.children?.forEach(walk);
  };
  return (tree: MdNode) => walk(tree);
}

/** Links between wiki pages name the API's routes; inside the console they open the console's wiki view. */
function consoleUrl(url: string): string {
  const m = /^\/library\/wiki-page\/(entity|topic|crystal)\/(.+)$/.exec(url);
  if (m) return `/ui/library/wiki/${m[1]}/${m[2]}`;
  return defaultUrlTransform(url);
}

/** Markdown rendered to React elements (no innerHTML): raw HTML shows as text, and link and image URLs pass
 * react-markdown's safe-protocol filter (no `javascript:`); stored text never becomes markup. */
export function MarkdownText({ text }: { text: string }) {
  return (
    <div className="markdown">
      <Markdown remarkPlugins={[htmlAsText]} urlTransform={consoleUrl}>
        {text}
      </Markdown>
    </div>
  );
}

export function fmtTime(iso: string | null | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** The current space (the `space` URL parameter; `default` when absent). */
export function useSpace(): string {
  const [params] = useSearchParams();
  return params.get("space") || "default";
}

/** A link inside the console that keeps the current space. */
export function SpaceLink({ to, children, className }: { to: string; children: ReactNode; className?: string }) {
  const space = useSpace();
  const sep = to.includes("?") ? "&" : "?";
  const href = space === "default" ? to : `${to}${sep}space=${encodeURIComponent(space)}`;
  return (
    <Link to={href} className={className}>
      {children}
    </Link>
  );
}

/** Focus the element when the view opens (keyboard users land in the view's main control). */
export function useAutoFocus<T extends HTMLElement>() {
  const ref = useRef<T>(null);
  useEffect(() => ref.current?.focus(), []);
  return ref;
}

export function Pager({
  offset,
  limit,
  total,
  onOffset,
}: {
  offset: number;
  limit: number;
  total: number;
  onOffset: (o: number) => void;
}) {
  const last = Math.min(offset + limit, total);
  return (
    <nav className="pager" aria-label="Pages">
      <button type="button" disabled={offset === 0} onClick={() => onOffset(Math.max(0, offset - limit))}>
        Previous
      </button>
      <span>
        {total === 0 ? 0 : offset + 1}–{last} of {total.toLocaleString()}
      </span>
      <button type="button" disabled={last >= total} onClick={() => onOffset(offset + limit)}>
        Next
      </button>
    </nav>
  );
}

/** Sets document.title for the view. */
export function useTitle(title: string) {
  useEffect(() => {
    document.title = `${title} · Engram`;
  }, [title]);
}
