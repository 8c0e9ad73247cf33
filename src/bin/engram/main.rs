//! `engram`: the daemon (`serve`, feature `server`) and the evaluation harness (`eval locomo`, `eval longmemeval`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
#[cfg(feature = "server")]
use engram::{KnowledgeStore, StoreConfig};

mod eval;
mod keys;
mod ops;
mod sync;
mod transfer;

use keys::{KeyArgs, NewKeyArgs};

/// The daemon's allocator with feature `mimalloc`: mimalloc (Leijen, Zorn and de Moura, "Mimalloc: Free List
/// Sharding in Action", APLAS 2019) in place of the system's. A 1M-memory bulk load into PostgreSQL took 191 s
/// instead of 222 s with it, but a daemon loading 20,000 MiniLM memories peaked at 306-326 MiB against 143 MiB
/// (docs/deploy.md, "Memory"), so the default is the system's malloc, its arenas capped by
/// [`engram::server::cap_malloc_arenas`]. Only binaries choose an allocator: a program embedding the library
/// keeps its own.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "engram", version, about = "Local-first knowledge-memory engine")]
struct Cli {
    /// Log lines on stderr: `text` (readable) or `json` (one object per line: timestamp, level, target,
    /// message, fields, and the request id and route of a request's lines). The level comes from ENGRAM_LOG
    /// (`info` by default; `debug`, `engram=debug,warn`, ...).
    #[arg(long, global = true, env = "ENGRAM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// `--log-format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    /// Human-readable lines (colours on a terminal only).
    Text,
    /// One JSON object per line.
    Json,
}

/// `--index-mode`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum IndexModeArg {
    /// In-memory indexes.
    Memory,
    /// Each search reads its part of the indexes from the database (PostgreSQL).
    Database,
}

impl From<IndexModeArg> for engram::IndexMode {
    fn from(m: IndexModeArg) -> Self {
        match m {
            IndexModeArg::Memory => engram::IndexMode::Memory,
            IndexModeArg::Database => engram::IndexMode::Database,
        }
    }
}

/// Where the store's records live: the redb file in the data directory, or a PostgreSQL database.
#[derive(clap::Args, Clone, Debug, Default)]
struct DatabaseArgs {
    /// A PostgreSQL database in place of `<data_dir>/engram.redb` (build feature `postgres`):
    /// `postgres://user:password@host/db` or `host=/run/postgresql user=engram dbname=engram`. The data
    /// directory still holds the API key, saved graphs and exports.
    #[arg(long, env = "ENGRAM_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
}

/// Which embedder builds the vectors. Neither flag: the built-in static model.
#[derive(clap::Args, Clone, Debug)]
struct EmbedderArgs {
    /// Sentence-embedding model folder (ONNX file and tokenizer files; needs the `fastembed` feature and
    /// ORT_DYLIB_PATH pointing at ONNX Runtime).
    #[arg(long, env = "ENGRAM_EMBEDDING_MODEL_DIR", conflicts_with = "embedding_model")]
    embedding_model_dir: Option<PathBuf>,
    /// `builtin` for the built-in static model (the default), `hashing` for the character-trigram hashing
    /// embedder (no semantic similarity), a model from fastembed's list by name, downloaded into the cache on
    /// first use (needs the `fastembed-hub` feature), or `external:DIM` for a store that takes caller-supplied
    /// vectors of DIM floats (`embedding` on writes, `query_embedding` on searches).
    #[arg(long, env = "ENGRAM_EMBEDDING_MODEL")]
    embedding_model: Option<String>,
}

impl EmbedderArgs {
    fn select(&self) -> engram::Result<engram::embed::SelectedEmbedder> {
        use engram::embed::EmbedderChoice;
        let choice = match (&self.embedding_model_dir, self.embedding_model.as_deref()) {
            (Some(dir), _) => EmbedderChoice::ModelDir(dir.clone()),
            (None, Some("builtin")) => EmbedderChoice::Builtin,
            (None, Some("hashing")) => EmbedderChoice::Hashing,
            (None, Some(ext)) if ext.starts_with("external:") => {
                let dim = ext["external:".len()..].parse::<usize>().map_err(|_| {
                    engram::Error::new(
                        engram::ErrorKind::InvalidInput,
                        format!("--embedding-model {ext}: expected external:DIM with DIM a number, e.g. external:384"),
                    )
                })?;
                EmbedderChoice::External(dim)
            }
            (None, Some(name)) => EmbedderChoice::Named {
                name: name.to_string(),
                cache_dir: dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("engram").join("models"),
            },
            (None, None) => EmbedderChoice::Auto,
        };
        let selected = engram::embed::select(&choice)?;
        if let Some(why) = &selected.fallback {
            tracing::warn!("{why}");
        }
        tracing::info!(embedder = selected.embedder.name(), dimension = selected.embedder.dim(), "embedder ready");
        Ok(selected)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP daemon (needs the `server` feature).
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:14242", env = "ENGRAM_ADDR")]
        addr: String,
        /// Data directory (default: the platform data dir, e.g. ~/.local/share/engram).
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// API key (default: read or create <data_dir>/api-key).
        #[arg(long, env = "ENGRAM_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// Extra Host header names to accept (repeatable).
        #[arg(long = "allow-host")]
        allow_hosts: Vec<String>,
        /// A directory (besides the data directory) that server-side paths may name: data export and import,
        /// source ingestion by path (repeatable).
        #[arg(long = "allow-path")]
        allow_paths: Vec<PathBuf>,
        /// A host (name or IP literal) that URL ingestion may fetch even though it resolves to a loopback,
        /// private, link-local or other non-public address (repeatable; none by default).
        #[arg(long = "allow-url-host")]
        allow_url_hosts: Vec<String>,
        /// Longest a URL fetch may take, seconds, redirects and body included (connecting at most 10 s).
        #[arg(long = "url-timeout", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
        url_timeout: u64,
        /// A browser origin (`http://host:port`) allowed to call the API with CORS headers (repeatable; none
        /// by default).
        #[arg(long = "cors-origin")]
        cors_origins: Vec<String>,
        /// Largest request body in bytes.
        #[arg(long, default_value_t = 8 << 20)]
        max_body_bytes: usize,
        /// The store file's page cache (redb; `64MiB`, `256MiB`, `1GiB`, or bytes), the one cache of the daemon
        /// that its size bounds. The indexes that searches need are not a cache: they take what the store's
        /// size gives them (docs/deploy.md, "Memory"). Ignored with PostgreSQL.
        #[arg(long, env = "ENGRAM_CACHE_SIZE", default_value = "64MiB", value_parser = parse_cache_size)]
        cache_size: u64,
        /// Wrong API keys from one address within 5 minutes that block it for 10 minutes; 0 turns the lockout
        /// off (for API fuzzers that send wrong keys on purpose; keep it on otherwise).
        #[arg(long, default_value_t = 8)]
        lockout_failures: usize,
        /// Serve no web console at /ui/ (for a shared server that wants the API only).
        #[arg(long)]
        no_console: bool,
        /// Run the sync worker: this store syncs with the person's other devices through the folder of its sync
        /// group (`engram sync init` or `join` first; docs/sync.md).
        #[arg(long)]
        sync: bool,
        /// With --sync: another daemon of the same sync group to pull segments from directly
        /// (`http://host:port`, repeatable), authorised by the group's pairing key, not by that daemon's API key.
        #[arg(long = "sync-peer", requires = "sync", value_name = "URL")]
        sync_peers: Vec<String>,
        /// Days an expired memory (its `expires_at` passed) stays readable by id before the hourly expiry
        /// sweep forgets it.
        #[arg(long, env = "ENGRAM_EXPIRY_GRACE_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=36500))]
        expiry_grace_days: u64,
        /// Serve GET /metrics without the API key (a Prometheus on a trusted network that scrapes without
        /// credentials). Off by default: the metrics name routes and counts.
        #[arg(long, env = "ENGRAM_METRICS_PUBLIC")]
        metrics_public: bool,
        /// Write an online backup into <data_dir>/backups/ at this interval (`24h`, `30m`, `7d`); none by
        /// default. The first runs one interval after the start.
        #[arg(long, env = "ENGRAM_BACKUP_EVERY", value_parser = parse_interval)]
        backup_every: Option<std::time::Duration>,
        /// With --backup-every: scheduled backups kept (the oldest beyond it are deleted).
        #[arg(long, env = "ENGRAM_BACKUP_KEEP", default_value_t = 7, requires = "backup_every",
              value_parser = clap::value_parser!(u64).range(1..=10000))]
        backup_keep: u64,
        /// Where searches read their indexes: `memory` (loaded at start, kept current from the change feed) or
        /// `database` (PostgreSQL only: each search reads its part from the database; the daemon keeps no
        /// per-memory index, so it starts at once and holds little memory; docs/deploy.md, "Index modes").
        #[arg(long, env = "ENGRAM_INDEX_MODE", value_enum, default_value_t = IndexModeArg::Memory)]
        index_mode: IndexModeArg,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        embedder: EmbedderArgs,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Print a fresh one-time sign-in URL for the web console of a running daemon (needs the `server`
    /// feature); `--open` opens it in the default browser.
    Ui {
        /// The daemon's address.
        #[arg(long, default_value = "127.0.0.1:14242", env = "ENGRAM_ADDR")]
        addr: String,
        /// Data directory (default: the platform data dir), for the key file.
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// The daemon's API key (default: <data_dir>/api-key).
        #[arg(long, env = "ENGRAM_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// Open the URL in the default browser as well.
        #[arg(long)]
        open: bool,
    },
    /// Serve MCP over stdio for hosts that spawn a process (needs the `server` feature). Opens the store
    /// itself, or forwards every call to the daemon when the daemon holds the store. `--print-config` prints
    /// the snippet to add to a host's MCP configuration and exits.
    Mcp {
        /// Data directory (default: the platform data dir).
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// The daemon to forward to when it holds the store.
        #[arg(long, default_value = "127.0.0.1:14242", env = "ENGRAM_ADDR")]
        addr: String,
        /// The daemon's API key (default: <data_dir>/api-key).
        #[arg(long, env = "ENGRAM_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// The client app's name: the `source` of memories it creates (as the `APP` header over HTTP).
        #[arg(long, env = "NMEM_APP", default_value = "mcp_generic")]
        app: String,
        /// The space every call runs in (as `X-Nmem-Space-Id`).
        #[arg(long, env = "NMEM_SPACE_ID")]
        space_id: Option<String>,
        /// The agent's id (as `X-Nmem-Agent-Id`).
        #[arg(long, env = "NMEM_AGENT_ID")]
        agent_id: Option<String>,
        /// The host-local agent id (as `X-Nmem-Host-Agent-Id`).
        #[arg(long, env = "NMEM_HOST_AGENT_ID")]
        host_agent_id: Option<String>,
        /// `external-agent` lists only the 16 tools of the external-agent set.
        #[arg(long, value_parser = ["full", "external-agent"], default_value = "full")]
        tool_set: String,
        /// Print the MCP configuration snippet for this command and exit.
        #[arg(long)]
        print_config: bool,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        embedder: EmbedderArgs,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Write a versioned, checksummed archive of a store (the daemon must not be running on it).
    Export {
        /// Target `.zip` file (default `<data_dir>/exports/engram-export-<time>.zip`); with `--no-zip`, a directory.
        path: Option<PathBuf>,
        /// Data directory (default: the platform data dir).
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Write a directory instead of a ZIP file.
        #[arg(long)]
        no_zip: bool,
        /// Replace an existing file.
        #[arg(long)]
        overwrite: bool,
        /// Seal the archive in an age file that opens with a passphrase (read from
        /// ENGRAM_EXPORT_PASSPHRASE_FILE, else asked on the terminal); `age -d` opens it too.
        #[arg(long)]
        encrypt: bool,
        /// Seal the archive to an age recipient (`age1...`; repeatable) instead of a passphrase.
        #[arg(long = "recipient")]
        recipients: Vec<String>,
        /// Seal the archive to this encrypted store's own key instead (only this store opens it).
        #[arg(long, conflicts_with = "recipients")]
        to_store_key: bool,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Import an archive written by `export` (the daemon must not be running on the store), with a progress bar.
    Import {
        /// The archive (`.zip` or directory).
        path: PathBuf,
        /// Data directory (default: the platform data dir).
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Conflicts: `merge` fills empty fields of stored records, `skip` keeps them, `overwrite` replaces them.
        #[arg(long, default_value = "merge", value_parser = ["merge", "skip", "overwrite"])]
        mode: String,
        /// The passphrase of an archive encrypted with one: read from this file (else asked on the terminal
        /// when the archive needs it).
        #[arg(long, env = "ENGRAM_ARCHIVE_PASSPHRASE_FILE", hide_env_values = true)]
        archive_passphrase_file: Option<PathBuf>,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Bring a store to this release's format (opening it does the same), or with `--check` print what that
    /// would do without changing anything. A redb store is copied to `engram.redb.format-<old>.bak` first.
    Upgrade {
        /// Report the migrations (format before and after, records each rewrites) and change nothing.
        #[arg(long)]
        check: bool,
        /// Data directory (default: the platform data dir).
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        #[command(flatten)]
        database: DatabaseArgs,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Encrypt a plaintext store at rest (the daemon must not be running on it): the store file, its side files
    /// and upgrade backups, through a temporary file, kept until the new one is verified. The new key is a
    /// passphrase (asked twice) unless --new-key-file or --new-keychain.
    Encrypt {
        /// Data directory (default: the platform data dir).
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        #[command(flatten)]
        new: NewKeyArgs,
    },
    /// Turn an encrypted store back into a plaintext one (the daemon must not be running on it).
    Decrypt {
        /// Data directory (default: the platform data dir).
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Change the key that opens an encrypted store (the daemon must not be running on it): the data key is
    /// rewrapped (instant), or with --rotate-data-key every block is re-encrypted under a new one.
    Rekey {
        /// Data directory (default: the platform data dir).
        #[arg(long, env = "ENGRAM_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Add the new key beside the existing ones (up to 8) instead of replacing them.
        #[arg(long)]
        add: bool,
        /// Re-encrypt every block under a new random data key (the store then opens with the new key only).
        #[arg(long, conflicts_with = "add")]
        rotate_data_key: bool,
        #[command(flatten)]
        key: KeyArgs,
        #[command(flatten)]
        new: NewKeyArgs,
    },
    /// Write a new random key file (64 hex digits, mode 0600) for --key-file.
    Keygen {
        /// Where to write it (refused if it exists).
        path: PathBuf,
    },
    /// Write a consistent, verified backup of the store to DEST while the daemon serves (it is asked through
    /// --addr), or of the closed store when no daemon runs. An encrypted store's backup stays encrypted.
    Backup(ops::BackupArgs),
    /// Put a backup in place of the store (the daemon must be stopped; the replaced store is kept beside
    /// it), or with --verify only check the backup.
    Restore(ops::RestoreArgs),
    /// Install or remove a systemd unit (Linux) or launchd agent (macOS) that runs the daemon.
    Service {
        #[command(subcommand)]
        which: ops::ServiceCommand,
    },
    /// Print a shell completion script: `engram completions bash > /etc/bash_completion.d/engram`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `engram man > /usr/local/share/man/man1/engram.1`.
    Man,
    /// Print the daemon's OpenAPI 3.1 document (JSON) without starting it (needs the `server` feature); the web
    /// console's TypeScript types are generated from it (`ui/src/schema.gen.ts`).
    Openapi,
    /// Sync this store with the person's other devices through a shared folder (docs/sync.md).
    Sync {
        #[command(subcommand)]
        which: sync::SyncCommand,
    },
    /// Evaluate retrieval on a dataset.
    Eval {
        #[command(subcommand)]
        which: eval::EvalCommand,
    },
}

fn default_data_dir() -> PathBuf {
    dirs::data_dir().unwrap_or_else(|| PathBuf::from(".")).join("engram")
}

/// `--cache-size`: 1 MiB to 1 TiB.
fn parse_cache_size(s: &str) -> Result<u64, String> {
    let size: bytesize::ByteSize = s.trim().parse().map_err(|e| format!("{e} (e.g. 64MiB, 1GiB)"))?;
    match size.as_u64() {
        b if (1 << 20..=1 << 40).contains(&b) => Ok(b),
        b => Err(format!("{b} bytes: give 1MiB to 1TiB")),
    }
}

/// `--backup-every`: a duration such as `24h`, `30m` or `7d`, at least one second.
fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (e.g. 24h, 30m, 7d)"))?;
    if d < std::time::Duration::from_secs(1) {
        return Err("at least 1s".into());
    }
    Ok(d)
}

/// Logs on stderr in `format`, at the level of ENGRAM_LOG (`info` by default).
fn init_logs(format: LogFormat) {
    // rmcp logs every MCP request and response whole at debug, memory text and all, and hyper and h2 log
    // headers (the API key among them) at trace: they stay at info whatever ENGRAM_LOG says, so that no log
    // line ever holds a memory or a key (docs/security.md).
    let mut filter = tracing_subscriber::EnvFilter::try_from_env("ENGRAM_LOG").unwrap_or_else(|_| "info".into());
    for cap in ["rmcp=info", "hyper=info", "hyper_util=info", "h2=info", "ureq=info", "ureq_proto=info"] {
        if let Ok(d) = cap.parse() {
            filter = filter.add_directive(d);
        }
    }
    let fmt = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Json => fmt.json().flatten_event(true).with_current_span(true).with_span_list(false).init(),
        // Colour codes only on a terminal: a log file or journald gets plain text.
        LogFormat::Text => fmt.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
    }
}

fn main() -> ExitCode {
    #[cfg(feature = "server")]
    engram::server::cap_malloc_arenas();
    engram::metrics::mark_start();
    let cli = Cli::parse();
    init_logs(cli.log_format);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.chain());
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> engram::Result<()> {
    match cli.command {
        Command::Serve {
            addr,
            data_dir,
            api_key,
            allow_hosts,
            allow_paths,
            allow_url_hosts,
            url_timeout,
            cors_origins,
            max_body_bytes,
            cache_size,
            lockout_failures,
            no_console,
            sync,
            sync_peers,
            expiry_grace_days,
            metrics_public,
            backup_every,
            backup_keep,
            index_mode,
            database,
            embedder,
            key,
        } => {
            let data_dir = data_dir.unwrap_or_else(default_data_dir);
            let encryption = key.encryption(&data_dir)?;
            let serve_args = ServeArgs {
                addr,
                data_dir,
                api_key,
                allow_hosts,
                allow_paths,
                allow_url_hosts,
                url_timeout,
                cors_origins,
                max_body_bytes,
                cache_size,
                lockout_failures,
                console: !no_console,
                sync,
                sync_peers,
                database_url: database.database_url,
                expiry_grace_days,
                index_mode: index_mode.into(),
                encryption,
                metrics_public,
                backups: backup_every.map(|every| (every, backup_keep as usize)),
            };
            serve(serve_args, embedder.select()?)
        }
        mcp @ Command::Mcp { .. } => mcp_command(mcp),
        Command::Ui { addr, data_dir, api_key, open } => ui_command(addr, data_dir, api_key, open),
        Command::Export { path, data_dir, no_zip, overwrite, encrypt, recipients, to_store_key, database, key } => {
            let seal = transfer::ArchiveSeal { passphrase: encrypt, recipients, store_key: to_store_key };
            transfer::export(path, data_dir.unwrap_or_else(default_data_dir), no_zip, overwrite, seal, database, &key)
        }
        Command::Import { path, data_dir, mode, archive_passphrase_file, database, key } => transfer::import(
            path,
            data_dir.unwrap_or_else(default_data_dir),
            mode,
            archive_passphrase_file,
            database,
            &key,
        ),
        Command::Upgrade { check, data_dir, database, key } => {
            transfer::upgrade(check, data_dir.unwrap_or_else(default_data_dir), database, &key)
        }
        Command::Encrypt { data_dir, new } => keys::encrypt(&data_dir.unwrap_or_else(default_data_dir), &new),
        Command::Decrypt { data_dir, key } => keys::decrypt(&data_dir.unwrap_or_else(default_data_dir), &key),
        Command::Rekey { data_dir, add, rotate_data_key, key, new } => {
            keys::rekey(&data_dir.unwrap_or_else(default_data_dir), &key, &new, add, rotate_data_key)
        }
        Command::Keygen { path } => keys::keygen(&path),
        Command::Backup(a) => {
            let dir = a.data_dir.clone().unwrap_or_else(default_data_dir);
            ops::backup(a, dir)
        }
        Command::Restore(a) => {
            let dir = a.data_dir.clone().unwrap_or_else(default_data_dir);
            ops::restore(a, dir)
        }
        Command::Service { which } => ops::service(which, default_data_dir()),
        Command::Completions { shell } => {
            ops::completions(shell, &mut <Cli as clap::CommandFactory>::command());
            Ok(())
        }
        Command::Man => ops::man(<Cli as clap::CommandFactory>::command()),
        Command::Openapi => openapi_command(),
        Command::Sync { which } => sync::sync_command(which),
        Command::Eval { which } => eval::eval_command(which),
    }
}

/// `engram openapi`: the document `GET /openapi.json` serves, pretty-printed.
fn openapi_command() -> engram::Result<()> {
    #[cfg(feature = "server")]
    {
        let doc = serde_json::to_string_pretty(&engram::api::Api::openapi())
            .map_err(|e| engram::Error::new(engram::ErrorKind::Internal, e.to_string()))?;
        println!("{doc}");
        Ok(())
    }
    #[cfg(not(feature = "server"))]
    Err(engram::Error::new(engram::ErrorKind::Unavailable, "this build has no HTTP API (cargo feature `server`)"))
}

/// `engram mcp`: MCP over stdio, or `--print-config`.
fn mcp_command(command: Command) -> engram::Result<()> {
    let Command::Mcp {
        data_dir,
        addr,
        api_key,
        app,
        space_id,
        agent_id,
        host_agent_id,
        tool_set,
        print_config,
        database,
        embedder,
        key,
    } = command
    else {
        return Err(engram::Error::new(engram::ErrorKind::Internal, "not an mcp command"));
    };
    let data_dir = data_dir.unwrap_or_else(default_data_dir);
    let mut headers = vec![("app", app.as_str()), ("x-nmem-tool-set", tool_set.as_str())];
    for (k, v) in
        [("x-nmem-space-id", &space_id), ("x-nmem-agent-id", &agent_id), ("x-nmem-host-agent-id", &host_agent_id)]
    {
        if let Some(v) = v {
            headers.push((k, v.as_str()));
        }
    }
    let scope = engram::api::tools::Scope::from_headers(headers);
    if print_config {
        print_mcp_config(&data_dir);
        return Ok(());
    }
    let encryption = key.encryption(&data_dir)?;
    mcp_stdio(McpArgs { data_dir, addr, api_key, scope, database_url: database.database_url, encryption }, &embedder)
}

#[cfg_attr(not(feature = "server"), allow(dead_code))]
struct McpArgs {
    data_dir: PathBuf,
    addr: String,
    api_key: Option<String>,
    scope: engram::api::tools::Scope,
    database_url: Option<String>,
    encryption: Option<engram::storage::crypt::Encryption>,
}

/// The `mcpServers` entry that starts `engram mcp` (Claude Desktop, Claude Code, Cursor and most hosts read
/// this shape).
fn print_mcp_config(data_dir: &std::path::Path) {
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "engram".into());
    let snippet = serde_json::json!({
        "mcpServers": {
            "engram": {
                "command": exe,
                "args": ["mcp", "--data-dir", data_dir.display().to_string(), "--app", "claude-desktop"],
            }
        }
    });
    println!("{}", serde_json::to_string_pretty(&snippet).unwrap_or_default());
    eprintln!(
        "Add the entry above to your MCP host's configuration (for Claude Code: `claude mcp add engram -- {exe} mcp`).\n\
         Hosts that speak Streamable HTTP can use the daemon directly: http://127.0.0.1:14242/mcp with the header \
         `Authorization: Bearer <key in {}>`.",
        data_dir.join("api-key").display()
    );
}

#[cfg(feature = "server")]
fn mcp_stdio(args: McpArgs, embedder: &EmbedderArgs) -> engram::Result<()> {
    use engram::server::mcp::{Backend, McpFront, serve_stdio};
    let mut config = StoreConfig::new(&args.data_dir);
    config.database_url = args.database_url.clone();
    config.encryption = args.encryption.clone();
    let selected = embedder.select()?;
    config.embedder = selected.embedder;
    let backend = match KnowledgeStore::open(config) {
        Ok(store) => {
            tracing::info!(data_dir = %args.data_dir.display(), "MCP over stdio on the local store");
            let info = engram::api::ServiceInfo { embedding_fallback: selected.fallback, ..Default::default() };
            Backend::Local(engram::api::Api::new(std::sync::Arc::new(store), info))
        }
        Err(e) if e.kind() == engram::ErrorKind::Locked => {
            let addr = args.addr.parse().map_err(|_| {
                engram::Error::new(engram::ErrorKind::InvalidInput, format!("--addr {} is not host:port", args.addr))
            })?;
            let daemon = match args.api_key.filter(|k| !k.trim().is_empty()) {
                Some(k) => engram::server::client::Daemon::new(addr, k),
                None => engram::server::client::Daemon::with_key_file(addr, &args.data_dir)?,
            };
            tracing::info!(%addr, "the daemon holds the store: MCP calls are forwarded to it");
            Backend::Remote(std::sync::Arc::new(daemon))
        }
        Err(e) => return Err(e),
    };
    serve_stdio(McpFront::new(backend, Some(args.scope)))
}

#[cfg(not(feature = "server"))]
fn mcp_stdio(_: McpArgs, _: &EmbedderArgs) -> engram::Result<()> {
    Err(engram::Error::new(
        engram::ErrorKind::InvalidInput,
        "this build has no MCP server: rebuild with `cargo build --release --features server`",
    ))
}

/// `engram ui`: a fresh sign-in URL from the running daemon.
#[cfg(feature = "server")]
fn ui_command(addr: String, data_dir: Option<PathBuf>, api_key: Option<String>, open: bool) -> engram::Result<()> {
    use engram::server::client::Daemon;
    let addr = addr
        .parse()
        .map_err(|_| engram::Error::new(engram::ErrorKind::InvalidInput, format!("--addr {addr} is not host:port")))?;
    let daemon = match api_key.filter(|k| !k.trim().is_empty()) {
        Some(k) => Daemon::new(addr, k.trim().to_string()),
        None => Daemon::with_key_file(addr, &data_dir.unwrap_or_else(default_data_dir))?,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let url = rt.block_on(daemon.sign_in_url())?;
    println!("{url}");
    if open && let Err(e) = ::open::that(&url) {
        eprintln!("could not open a browser ({e}); open the URL above by hand");
    }
    Ok(())
}

#[cfg(not(feature = "server"))]
fn ui_command(_: String, _: Option<PathBuf>, _: Option<String>, _: bool) -> engram::Result<()> {
    Err(engram::Error::new(
        engram::ErrorKind::InvalidInput,
        "this build has no HTTP server: rebuild with `cargo build --release --features server`",
    ))
}

#[cfg_attr(not(feature = "server"), allow(dead_code))]
struct ServeArgs {
    addr: String,
    data_dir: PathBuf,
    api_key: Option<String>,
    allow_hosts: Vec<String>,
    allow_paths: Vec<PathBuf>,
    allow_url_hosts: Vec<String>,
    url_timeout: u64,
    cors_origins: Vec<String>,
    max_body_bytes: usize,
    /// `--cache-size` in bytes.
    cache_size: u64,
    lockout_failures: usize,
    console: bool,
    sync: bool,
    sync_peers: Vec<String>,
    database_url: Option<String>,
    expiry_grace_days: u64,
    index_mode: engram::IndexMode,
    encryption: Option<engram::storage::crypt::Encryption>,
    metrics_public: bool,
    /// `--backup-every` and `--backup-keep`.
    backups: Option<(std::time::Duration, usize)>,
}

#[cfg(feature = "server")]
fn serve(args: ServeArgs, embedder: engram::embed::SelectedEmbedder) -> engram::Result<()> {
    use engram::server::{ServerConfig, load_or_create_key, serve_until_signal};
    let ServeArgs {
        addr,
        data_dir,
        api_key,
        allow_hosts,
        allow_paths,
        allow_url_hosts,
        url_timeout,
        cors_origins,
        max_body_bytes,
        cache_size,
        lockout_failures,
        console,
        sync,
        sync_peers,
        database_url,
        expiry_grace_days,
        index_mode,
        encryption,
        metrics_public,
        backups,
    } = args;
    let addr = addr
        .parse()
        .map_err(|_| engram::Error::new(engram::ErrorKind::InvalidInput, format!("--addr {addr} is not host:port")))?;
    let key = match api_key.filter(|k| !k.trim().is_empty()) {
        Some(k) => k,
        None => {
            let (k, path) = load_or_create_key(&data_dir)?;
            println!("API key file: {}", path.display());
            k
        }
    };
    let mut store_config = StoreConfig::new(&data_dir);
    store_config.embedder = embedder.embedder;
    store_config.allowed_paths = allow_paths;
    store_config.url_policy.allow_hosts = allow_url_hosts;
    store_config.url_policy.total_timeout = std::time::Duration::from_secs(url_timeout);
    store_config.url_policy.connect_timeout = std::time::Duration::from_secs(url_timeout.min(10));
    store_config.database_url = database_url;
    store_config.index_mode = index_mode;
    store_config.expiry_grace = std::time::Duration::from_secs(expiry_grace_days * 86_400);
    store_config.encryption = encryption;
    store_config.cache_size_bytes = usize::try_from(cache_size).unwrap_or(usize::MAX);
    let store = std::sync::Arc::new(KnowledgeStore::open(store_config)?);
    let enc = store.admin().encryption();
    if enc.encrypted {
        println!(
            "store encrypted at rest ({}, opened with its {})",
            enc.cipher.as_deref().unwrap_or("?"),
            enc.key_source.as_deref().unwrap_or("?").replace('_', " ")
        );
    }
    println!("data directory: {}", data_dir.display());
    let mut config = ServerConfig::new(&data_dir);
    config.addr = addr;
    config.api_key = Some(key);
    config.allowed_hosts = allow_hosts;
    config.max_body_bytes = max_body_bytes;
    config.cors_origins = cors_origins;
    config.lockout_failures = lockout_failures;
    config.console = console;
    config.sync = sync;
    config.sync_peers = sync_peers;
    config.metrics_public = metrics_public;
    config.backups = backups.map(|(every, keep)| engram::server::ScheduledBackups { every, keep });
    let info = engram::api::ServiceInfo { embedding_fallback: embedder.fallback, ..Default::default() };
    serve_until_signal(config, store, info)
}

#[cfg(not(feature = "server"))]
fn serve(_: ServeArgs, _: engram::embed::SelectedEmbedder) -> engram::Result<()> {
    Err(engram::Error::new(
        engram::ErrorKind::InvalidInput,
        "this build has no HTTP server: rebuild with `cargo build --release --features server`",
    ))
}
