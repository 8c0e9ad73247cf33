//! Running the daemon for years (docs/operations.md): `engram backup` and `engram restore`, `engram service
//! install|uninstall` (a systemd unit or a launchd agent), `engram completions` and `engram man`.

use std::path::{Path, PathBuf};

use engram::{Error, ErrorKind, Result};

use super::keys::KeyArgs;

/// `engram backup DEST`: an online backup through the daemon when it runs, else a backup of the closed store.
#[derive(clap::Args, Debug)]
pub struct BackupArgs {
    /// The backup file to write (refused if it exists), e.g. `~/backups/engram-2026-12-06.redb`.
    pub dest: PathBuf,
    /// Data directory (default: the platform data dir).
    #[arg(long, env = "ENGRAM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The daemon to ask when it holds the store.
    #[arg(long, default_value = "127.0.0.1:14242", env = "ENGRAM_ADDR")]
    pub addr: String,
    /// The daemon's API key (default: <data_dir>/api-key).
    #[arg(long, env = "ENGRAM_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    #[command(flatten)]
    pub key: KeyArgs,
}

/// `engram restore SRC`.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// The backup file (written by `engram backup` or `POST /admin/backup`).
    pub src: PathBuf,
    /// Only check the backup (opened read-only: format, generation, every record kind, every memory record),
    /// and change nothing.
    #[arg(long)]
    pub verify: bool,
    /// Data directory of the store to replace (default: the platform data dir). The daemon must be stopped.
    #[arg(long, env = "ENGRAM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub key: KeyArgs,
}

fn config(data_dir: &Path, key: &KeyArgs) -> Result<engram::StoreConfig> {
    let mut c = engram::StoreConfig::new(data_dir);
    c.encryption = key.encryption(data_dir)?;
    Ok(c)
}

fn print_json(v: &impl serde::Serialize) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// `engram backup`.
pub fn backup(args: BackupArgs, data_dir: PathBuf) -> Result<()> {
    if args.dest.exists() {
        return Err(Error::new(ErrorKind::Conflict, format!("{} exists; choose another name", args.dest.display())));
    }
    let report = match through_daemon(&args, &data_dir)? {
        Some(r) => r,
        None => engram::store::backup_closed(&config(&data_dir, &args.key)?, &args.dest)?,
    };
    print_json(&report);
    Ok(())
}

/// The backup through a running daemon (written in its data directory, then moved to `DEST`); None when no
/// daemon answers at `--addr`.
#[cfg(feature = "server")]
fn through_daemon(args: &BackupArgs, data_dir: &Path) -> Result<Option<engram::store::BackupReport>> {
    use engram::server::client::Daemon;
    let addr = args
        .addr
        .parse()
        .map_err(|_| Error::new(ErrorKind::InvalidInput, format!("--addr {} is not host:port", args.addr)))?;
    if std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).is_err() {
        return Ok(None);
    }
    let daemon = match args.api_key.clone().filter(|k| !k.trim().is_empty()) {
        Some(k) => Daemon::new(addr, k.trim().to_string()),
        None => Daemon::with_key_file(addr, data_dir)?,
    };
    // Absolute: the daemon takes relative paths from its own data directory.
    let staged =
        std::path::absolute(data_dir)?.join("backups").join(format!(".cli-{}.redb", uuid::Uuid::now_v7().simple()));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut report = rt.block_on(daemon.backup(&staged.display().to_string()))?;
    let staged = PathBuf::from(&report.backup_path);
    move_file(&staged, &args.dest)?;
    report.backup_path = args.dest.display().to_string();
    Ok(Some(report))
}

#[cfg(not(feature = "server"))]
fn through_daemon(_: &BackupArgs, _: &Path) -> Result<Option<engram::store::BackupReport>> {
    Ok(None)
}

/// Moves `from` to `to` (a rename, or a copy to `to.partial`, flushed and renamed, across file systems).
#[cfg_attr(not(feature = "server"), allow(dead_code))]
fn move_file(from: &Path, to: &Path) -> Result<()> {
    if let Some(p) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(p)?;
    }
    if std::fs::rename(from, to).is_ok() {
        return Ok(());
    }
    let partial = to.with_extension("partial");
    std::fs::copy(from, &partial)?;
    std::fs::File::open(&partial)?.sync_all()?;
    std::fs::rename(&partial, to)?;
    std::fs::remove_file(from)?;
    Ok(())
}

/// `engram restore`.
pub fn restore(args: RestoreArgs, data_dir: PathBuf) -> Result<()> {
    let c = config(&data_dir, &args.key)?;
    if args.verify {
        let check = engram::store::verify_backup(&c, &args.src)?;
        print_json(&check);
        eprintln!("backup ok: {} memories, generation {}", check.memories, check.generation);
        return Ok(());
    }
    let report = engram::store::restore_backup(&c, &args.src)?;
    print_json(&report);
    if let Some(p) = &report.previous {
        eprintln!("restored; the store it replaced is kept as {p}");
    }
    Ok(())
}

/// `engram service`.
#[derive(clap::Subcommand, Debug)]
pub enum ServiceCommand {
    /// Write a systemd unit (Linux) or a launchd agent (macOS) that runs `engram serve` with a restart policy,
    /// and print how to enable it.
    Install(ServiceArgs),
    /// Remove the unit or agent written by `install` (stop it first; the command prints how).
    Uninstall(ServiceArgs),
}

/// Where and how the service runs.
#[derive(clap::Args, Debug)]
pub struct ServiceArgs {
    /// A per-user service (`~/.config/systemd/user`, `~/Library/LaunchAgents`) instead of a system one
    /// (`/etc/systemd/system`, `/Library/LaunchDaemons`; needs root).
    #[arg(long)]
    pub user: bool,
    /// Data directory the service uses (default: the platform data dir).
    #[arg(long, env = "ENGRAM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address the service listens on.
    #[arg(long, default_value = "127.0.0.1:14242")]
    pub addr: String,
    /// Print the file instead of writing it.
    #[arg(long)]
    pub print: bool,
    /// Write the file into this directory instead of the platform's (packaging, tests).
    #[arg(long)]
    pub unit_dir: Option<PathBuf>,
}

/// The unit's file name.
const UNIT: &str = "engram.service";
/// The launchd label and plist name.
const LABEL: &str = "dev.engram.daemon";

/// A systemd unit for `engram serve`: restart on failure, and systemd's sandbox (the file system read-only but
/// for the data directory, no new privileges, a private /tmp, no kernel tunables or modules).
pub fn systemd_unit(exe: &Path, data_dir: &Path, addr: &str, user: bool, run_as: Option<&str>) -> String {
    let run_as = match (user, run_as) {
        (false, Some(u)) => format!("User={u}\n"),
        _ => String::new(),
    };
    let wanted = if user { "default.target" } else { "multi-user.target" };
    format!(
        "[Unit]\n\
         Description=Engram knowledge-memory daemon\n\
         After=network.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         {run_as}\
         ExecStart=\"{exe}\" serve --data-dir \"{data}\" --addr \"{addr}\"\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         # Stops cleanly on SIGTERM: in-flight requests finish and the store closes.\n\
         TimeoutStopSec=60\n\
         NoNewPrivileges=yes\n\
         PrivateTmp=yes\n\
         ProtectSystem=strict\n\
         ReadWritePaths=\"{data}\"\n\
         ProtectKernelTunables=yes\n\
         ProtectKernelModules=yes\n\
         ProtectControlGroups=yes\n\
         RestrictSUIDSGID=yes\n\
         LockPersonality=yes\n\
         \n\
         [Install]\n\
         WantedBy={wanted}\n",
        exe = systemd_quoted(&exe.display().to_string()),
        data = systemd_quoted(&data_dir.display().to_string()),
        addr = systemd_quoted(addr),
    )
}

/// `s` as the inside of a double-quoted systemd word: backslashes and quotes escaped, `%` (specifiers) and `$`
/// (variables) doubled.
fn systemd_quoted(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('%', "%%").replace('$', "$$")
}

/// A launchd property list for `engram serve`: started at load, restarted when it exits abnormally, its
/// output in `<data_dir>/engram.log`.
pub fn launchd_plist(exe: &Path, data_dir: &Path, addr: &str) -> String {
    let esc = |s: String| html_escape::encode_text(&s).into_owned();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key><string>{LABEL}</string>
  <key>ProgramArguments</key>
  <array>
    <string>{exe}</string><string>serve</string>
    <string>--data-dir</string><string>{data}</string>
    <string>--addr</string><string>{addr}</string>
  </array>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
  <key>StandardOutPath</key><string>{log}</string>
  <key>StandardErrorPath</key><string>{log}</string>
</dict>
</plist>
"#,
        exe = esc(exe.display().to_string()),
        data = esc(data_dir.display().to_string()),
        addr = esc(addr.to_string()),
        log = esc(data_dir.join("engram.log").display().to_string()),
    )
}

/// `engram service install|uninstall`.
pub fn service(cmd: ServiceCommand, default_data_dir: PathBuf) -> Result<()> {
    let (install, args) = match cmd {
        ServiceCommand::Install(a) => (true, a),
        ServiceCommand::Uninstall(a) => (false, a),
    };
    let data_dir = args.data_dir.clone().unwrap_or(default_data_dir);
    let data_dir = if data_dir.is_absolute() { data_dir } else { std::env::current_dir()?.join(data_dir) };
    let exe = std::env::current_exe()?;
    let mac = cfg!(target_os = "macos");
    let home = dirs::home_dir().unwrap_or_else(|| PathBuf::from("/"));
    let dir = match (&args.unit_dir, mac, args.user) {
        (Some(d), _, _) => d.clone(),
        (None, true, true) => home.join("Library/LaunchAgents"),
        (None, true, false) => PathBuf::from("/Library/LaunchDaemons"),
        (None, false, true) => dirs::config_dir().unwrap_or_else(|| home.join(".config")).join("systemd/user"),
        (None, false, false) => PathBuf::from("/etc/systemd/system"),
    };
    let (name, text) = if mac {
        (format!("{LABEL}.plist"), launchd_plist(&exe, &data_dir, &args.addr))
    } else {
        let run_as = std::env::var("SUDO_USER").or_else(|_| std::env::var("USER")).ok();
        (UNIT.to_string(), systemd_unit(&exe, &data_dir, &args.addr, args.user, run_as.as_deref()))
    };
    let path = dir.join(&name);
    let ctl = if args.user { "systemctl --user" } else { "sudo systemctl" };
    if !install {
        match std::fs::remove_file(&path) {
            Ok(()) => eprintln!("removed {}", path.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => eprintln!("no service file at {}", path.display()),
            Err(e) => return Err(e.into()),
        }
        if mac {
            eprintln!("stop it with: launchctl bootout gui/$(id -u)/{LABEL}");
        } else {
            eprintln!("stop it with: {ctl} disable --now engram && {ctl} daemon-reload");
        }
        return Ok(());
    }
    if args.print {
        print!("{text}");
        return Ok(());
    }
    std::fs::create_dir_all(&dir)?;
    std::fs::create_dir_all(&data_dir)?;
    std::fs::write(&path, text)?;
    eprintln!("wrote {}", path.display());
    if mac {
        eprintln!("start it now and at every login with: launchctl bootstrap gui/$(id -u) {}", path.display());
    } else {
        eprintln!("start it now and at every boot with: {ctl} daemon-reload && {ctl} enable --now engram");
        if args.user {
            eprintln!("(a user service runs while you are logged in; `loginctl enable-linger` keeps it running)");
        }
    }
    Ok(())
}

/// `engram completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell, cmd: &mut clap::Command) {
    clap_complete::generate(shell, cmd, "engram", &mut std::io::stdout());
}

/// `engram man`: the roff man page of `engram` on stdout.
pub fn man(cmd: clap::Command) -> Result<()> {
    clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?;
    Ok(())
}
