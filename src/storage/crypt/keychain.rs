//! The OS keychain as a key source, through keyring-core and its per-OS stores: the macOS Keychain, the
//! Windows Credential Manager, and on Linux the kernel's keyutils (persistent until reboot: docs/security.md
//! says to add a passphrase or key-file slot beside it).

use std::sync::Once;

use zeroize::Zeroizing;

use super::keys::{KEY_BYTES, SecretKey, hex};
use crate::error::{Error, ErrorCode, ErrorKind, Result};

/// The keychain service every entry is stored under.
pub(crate) const SERVICE: &str = "engram";

static INSTALL: Once = Once::new();

/// Installs this OS's credential store as keyring-core's default, once per process. A program that installed
/// its own store first keeps it.
fn install() -> Result<()> {
    let mut failed = None;
    INSTALL.call_once(|| {
        if keyring_core::get_default_store().is_some() {
            return;
        }
        match os_store() {
            Ok(Some(store)) => keyring_core::set_default_store(store),
            Ok(None) => {}
            Err(e) => failed = Some(e),
        }
    });
    if let Some(e) = failed {
        return Err(unavailable(format!("the OS keychain cannot be opened: {e}")));
    }
    if keyring_core::get_default_store().is_none() {
        return Err(unavailable("this platform has no OS keychain Engram can use; use a passphrase or a key file"));
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn os_store() -> keyring_core::Result<Option<std::sync::Arc<keyring_core::CredentialStore>>> {
    Ok(Some(linux_keyutils_keyring_store::Store::new()?))
}

#[cfg(target_os = "macos")]
fn os_store() -> keyring_core::Result<Option<std::sync::Arc<keyring_core::CredentialStore>>> {
    Ok(Some(apple_native_keyring_store::keychain::Store::new()?))
}

#[cfg(windows)]
fn os_store() -> keyring_core::Result<Option<std::sync::Arc<keyring_core::CredentialStore>>> {
    Ok(Some(windows_native_keyring_store::Store::new()?))
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
fn os_store() -> keyring_core::Result<Option<std::sync::Arc<keyring_core::CredentialStore>>> {
    Ok(None)
}

fn unavailable(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unavailable, msg)
}

fn entry(service: &str, account: &str) -> Result<keyring_core::Entry> {
    install()?;
    keyring_core::Entry::new(service, account)
        .map_err(|e| unavailable(format!("the OS keychain refused the entry {service}/{account}: {e}")))
}

/// Stores `key` under `service`/`account`, replacing what was there.
pub(crate) fn put(service: &str, account: &str, key: &SecretKey) -> Result<()> {
    let text = Zeroizing::new(hex(key.bytes()));
    entry(service, account)?
        .set_password(&text)
        .map_err(|e| unavailable(format!("the OS keychain did not store the key ({service}/{account}): {e}")))
}

/// The key under `service`/`account`.
///
/// # Errors
/// [`ErrorKind::WrongKey`] (`key_required`) when the entry is missing; [`ErrorKind::Unavailable`] when the
/// keychain cannot be reached; [`ErrorKind::Corrupt`] when the entry is not a key Engram wrote.
pub(crate) fn get(service: &str, account: &str) -> Result<SecretKey> {
    let text = match entry(service, account)?.get_password() {
        Ok(t) => Zeroizing::new(t),
        Err(keyring_core::Error::NoEntry) => {
            return Err(Error::new(
                ErrorKind::WrongKey,
                format!(
                    "the OS keychain holds no key for this store (entry {service}/{account}); \
                     open it with its passphrase or key file instead"
                ),
            )
            .with_code(ErrorCode::KeyRequired));
        }
        Err(e) => return Err(unavailable(format!("the OS keychain cannot be read ({service}/{account}): {e}"))),
    };
    let bad = || super::corrupt(format!("the OS keychain entry {service}/{account} is not a key Engram wrote"));
    if text.len() != 2 * KEY_BYTES {
        return Err(bad());
    }
    let mut key = SecretKey::zeroed();
    for (i, b) in key.bytes_mut().iter_mut().enumerate() {
        *b = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16).map_err(|_| bad())?;
    }
    Ok(key)
}

/// Removes the entry; a missing one is fine.
pub(crate) fn delete(service: &str, account: &str) -> Result<()> {
    match entry(service, account)?.delete_credential() {
        Ok(()) | Err(keyring_core::Error::NoEntry) => Ok(()),
        Err(e) => Err(unavailable(format!("the OS keychain did not remove {service}/{account}: {e}"))),
    }
}
