//! The AEAD that seals the blocks of an encrypted store file, named by the key header's cipher id.
//!
//! Both ciphers take a 256-bit key, a 192-bit nonce (random for every write, so that no nonce repeats in
//! practice: 2^96 writes before a collision is likely) and give a 128-bit tag, so that a block's frame on disk
//! is the same 4,136 bytes under either:
//!
//! * **XAES-256-GCM** (C2SP's specification, `c2sp.org/XAES-256-GCM`): AES-256-GCM under a key derived per
//!   nonce (NIST SP 800-108r1 counter-mode KDF with AES-256 CMAC) from the first 96 bits of the nonce. With the
//!   CPU's AES and carry-less multiply instructions it runs at about 1.9 GB/s on one core here, 2.5 times
//!   XChaCha20-Poly1305 (`cargo bench --bench encryption`), which is what a reopen pays for every page it
//!   reads. The default where those instructions exist.
//! * **XChaCha20-Poly1305** (draft-irtf-cfrg-xchacha): 0.74 GB/s here, and about that on CPUs without AES
//!   instructions, where software AES is several times slower: the default there.
//!
//! A store keeps the cipher it was made with; `engram encrypt --cipher` and `engram rekey --rotate-data-key
//! --cipher` choose another. Every build reads both.

use chacha20poly1305::XChaCha20Poly1305;
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use xaes_256_gcm::Xaes256Gcm;
use xaes_256_gcm::aead::AeadInOut;

use super::keys::SecretKey;
use crate::error::{Error, ErrorKind, Result};

/// Bytes of a block cipher's nonce.
pub(crate) const NONCE: usize = 24;
/// Bytes of a block cipher's tag.
pub(crate) const TAG: usize = 16;

/// The AEAD that seals an encrypted store's blocks (module docs of `storage::crypt`, docs/security.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cipher {
    /// XAES-256-GCM (C2SP): AES-256-GCM with 192-bit nonces. Fastest where the CPU has AES instructions.
    Xaes256Gcm,
    /// XChaCha20-Poly1305: the same speed on every CPU.
    XChaCha20Poly1305,
}

impl Cipher {
    /// The cipher's id in the key header.
    pub(crate) fn id(self) -> u8 {
        match self {
            Cipher::XChaCha20Poly1305 => 1,
            Cipher::Xaes256Gcm => 2,
        }
    }

    /// The cipher with header id `id`, if this build knows it.
    pub(crate) fn from_id(id: u8) -> Option<Cipher> {
        match id {
            1 => Some(Cipher::XChaCha20Poly1305),
            2 => Some(Cipher::Xaes256Gcm),
            _ => None,
        }
    }

    /// `xaes-256-gcm` or `xchacha20-poly1305`: the name `/health` reports and `--cipher` takes.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::XChaCha20Poly1305 => "xchacha20-poly1305",
            Cipher::Xaes256Gcm => "xaes-256-gcm",
        }
    }

    /// The faster cipher on this CPU: XAES-256-GCM when it has AES and carry-less multiply instructions
    /// (x86-64 AES-NI and PCLMULQDQ, AArch64 AES and PMULL), XChaCha20-Poly1305 otherwise.
    pub fn fastest_here() -> Cipher {
        #[cfg(target_arch = "x86_64")]
        let hardware_aes =
            std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq");
        #[cfg(target_arch = "aarch64")]
        let hardware_aes =
            std::arch::is_aarch64_feature_detected!("aes") && std::arch::is_aarch64_feature_detected!("pmull");
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let hardware_aes = false;
        if hardware_aes { Cipher::Xaes256Gcm } else { Cipher::XChaCha20Poly1305 }
    }
}

impl std::fmt::Display for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Cipher {
    type Err = Error;

    /// Parses `xaes-256-gcm` or `xchacha20-poly1305` (ASCII case ignored).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming both.
    fn from_str(s: &str) -> Result<Cipher> {
        [Cipher::Xaes256Gcm, Cipher::XChaCha20Poly1305]
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidInput,
                    format!("unknown cipher {s:?}: use xaes-256-gcm or xchacha20-poly1305"),
                )
            })
    }
}

/// A [`Cipher`] keyed with a store's data key (the key schedule is zeroized when dropped).
pub(crate) enum BlockCipher {
    XChaCha20Poly1305(Box<XChaCha20Poly1305>),
    Xaes256Gcm(Box<Xaes256Gcm>),
}

/// Authentication failed: the ciphertext, tag, nonce or associated data is not what was sealed.
#[derive(Debug)]
pub(crate) struct Unauthentic;

impl BlockCipher {
    /// The cipher of header id `id` under `key`.
    ///
    /// # Errors
    /// [`ErrorKind::Corrupt`] for an id this build does not know (a file from a newer Engram, or a damaged
    /// header that still passes its SHA-256).
    pub(crate) fn new(id: u8, key: &SecretKey) -> Result<BlockCipher> {
        match Cipher::from_id(id) {
            Some(c) => Ok(BlockCipher::of(c, key)),
            None => Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "the encrypted store names cipher {id}, which this Engram does not know: open it with a newer \
                     release"
                ),
            )),
        }
    }

    /// `cipher` under `key`.
    pub(crate) fn of(cipher: Cipher, key: &SecretKey) -> BlockCipher {
        match cipher {
            Cipher::XChaCha20Poly1305 => {
                BlockCipher::XChaCha20Poly1305(Box::new(XChaCha20Poly1305::new(key.bytes().into())))
            }
            Cipher::Xaes256Gcm => {
                BlockCipher::Xaes256Gcm(Box::new(<Xaes256Gcm as xaes_256_gcm::aead::KeyInit>::new(key.bytes().into())))
            }
        }
    }

    /// Which cipher this is.
    pub(crate) fn cipher(&self) -> Cipher {
        match self {
            BlockCipher::XChaCha20Poly1305(_) => Cipher::XChaCha20Poly1305,
            BlockCipher::Xaes256Gcm(_) => Cipher::Xaes256Gcm,
        }
    }

    /// Encrypts `buf` in place under `nonce` and `aad`; returns the tag.
    pub(crate) fn seal(&self, nonce: &[u8; NONCE], aad: &[u8], buf: &mut [u8]) -> std::io::Result<[u8; TAG]> {
        let failed = |_| std::io::Error::other("sealing a block failed");
        Ok(match self {
            BlockCipher::XChaCha20Poly1305(c) => {
                c.encrypt_in_place_detached(nonce.into(), aad, buf).map_err(failed)?.into()
            }
            BlockCipher::Xaes256Gcm(c) => c
                .encrypt_inout_detached(nonce.into(), aad, buf.into())
                .map_err(|_| std::io::Error::other("sealing a block failed"))?
                .into(),
        })
    }

    /// Decrypts `buf` in place under `nonce` and `aad` if `tag` authenticates it; otherwise `buf` is left
    /// unspecified and must not be used.
    pub(crate) fn open(
        &self,
        nonce: &[u8; NONCE],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG],
    ) -> Result<(), Unauthentic> {
        match self {
            BlockCipher::XChaCha20Poly1305(c) => {
                c.decrypt_in_place_detached(nonce.into(), aad, buf, tag.into()).map_err(|_| Unauthentic)
            }
            BlockCipher::Xaes256Gcm(c) => {
                c.decrypt_inout_detached(nonce.into(), aad, buf.into(), tag.into()).map_err(|_| Unauthentic)
            }
        }
    }
}

/// The first `N` bytes of `b` as an array (zeros past its end; callers pass slices of exactly `N` bytes: a
/// nonce or a tag cut from a frame).
pub(crate) fn array<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    let n = b.len().min(N);
    a[..n].copy_from_slice(&b[..n]);
    a
}
