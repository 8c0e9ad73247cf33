//! What encryption at rest costs beside the store-level figures of `benches/synthetic.rs --encrypted`
//! (docs/security.md): the Argon2id unlock of a passphrase slot, the block device's write and read throughput
//! under each block cipher (XAES-256-GCM and XChaCha20-Poly1305), and the latency of a single durable write (one
//! fsync on a plaintext store, two on an encrypted one).
//!
//! `cargo bench --bench encryption [-- --mib 256 --writes 200]`

use std::time::Instant;

use engram::storage::crypt::{Cipher, EncryptedDevice, Encryption, Opened};
use engram::storage::{Device, FileDevice};
use engram::{KnowledgeStore, NewMemory, StoreConfig};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> engram::Result<()> {
    let tmp = tempfile::tempdir()?;
    let key = tmp.path().join("store.key");
    engram::storage::crypt::write_key_file(&key)?;

    // Unlock: opening a small store with a passphrase against opening it with a key file (HKDF only); the
    // difference is Argon2id with the default parameters.
    let pass_dir = tmp.path().join("pass");
    drop(KnowledgeStore::open(StoreConfig::new(&pass_dir).encrypted(Encryption::passphrase("correct horse")))?);
    let file_dir = tmp.path().join("file");
    drop(KnowledgeStore::open(StoreConfig::new(&file_dir).encrypted(Encryption::key_file(&key)))?);
    let time_open = |c: &dyn Fn() -> StoreConfig| -> engram::Result<f64> {
        let mut v = Vec::new();
        for _ in 0..7 {
            let t = Instant::now();
            drop(KnowledgeStore::open(c())?);
            v.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(median(v))
    };
    let with_pass = time_open(&|| StoreConfig::new(&pass_dir).encrypted(Encryption::passphrase("correct horse")))?;
    let with_file = time_open(&|| StoreConfig::new(&file_dir).encrypted(Encryption::key_file(&key)))?;
    let kdf = Encryption::passphrase("x").kdf;
    println!(
        "open of a small store: {with_pass:.0} ms with a passphrase (Argon2id {}), {with_file:.0} ms with a key file: \
         unlock {:.0} ms",
        kdf.describe(),
        with_pass - with_file
    );

    // The device: sequential writes of whole blocks, then reads, under each block cipher.
    let mib = arg("--mib", 256);
    for cipher in [Cipher::Xaes256Gcm, Cipher::XChaCha20Poly1305] {
        let path = tmp.path().join(format!("device-{cipher}.bin"));
        let enc = Encryption::key_file(&key).with_cipher(cipher);
        let (dev, _) = EncryptedDevice::create(Box::new(FileDevice::open(&path)?), &enc)?;
        let chunk = vec![0x5au8; 1 << 20];
        let t = Instant::now();
        dev.set_len((mib as u64) << 20)?;
        for i in 0..mib as u64 {
            dev.write(i << 20, &chunk)?;
        }
        dev.sync_data()?;
        let write_s = t.elapsed().as_secs_f64();
        dev.close()?;
        drop(dev);
        let Opened::Ready(dev, _) = EncryptedDevice::open(Box::new(FileDevice::open(&path)?), &enc.source, true)?
        else {
            unreachable!("the device was just written");
        };
        let mut page = vec![0u8; 4096];
        let t = Instant::now();
        for i in 0..((mib as u64) << 8) {
            dev.read(4096 + (i % (((mib as u64) << 8) - 1)) * 4096, &mut page)?;
        }
        let read_s = t.elapsed().as_secs_f64();
        println!(
            "device, {cipher}: {mib} MiB written in 1 MiB writes at {:.0} MB/s (with one fsync), read in 4 KiB \
             pages at {:.0} MB/s ({:.1} µs a page, file in the OS cache)",
            mib as f64 * 1.048576 / write_s,
            mib as f64 * 1.048576 / read_s,
            read_s * 1e6 / ((mib as f64) * 256.0)
        );
        drop(dev);
        std::fs::remove_file(&path)?;
    }

    // A single durable write: one memory per call.
    let writes = arg("--writes", 200);
    for (name, config) in [
        ("plaintext", StoreConfig::new(tmp.path().join("w-plain"))),
        ("encrypted", StoreConfig::new(tmp.path().join("w-enc")).encrypted(Encryption::key_file(&key))),
    ] {
        let store = KnowledgeStore::open(config)?;
        let mut lat = Vec::new();
        for i in 0..writes {
            let t = Instant::now();
            store
                .memories()
                .create(NewMemory { content: format!("note {i} about the harbour"), ..Default::default() })?;
            lat.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let p50 = median(lat.clone());
        lat.sort_by(f64::total_cmp);
        println!(
            "single create_memory, {name}: p50 {p50:.2} ms, p99 {:.2} ms ({writes} writes)",
            lat[lat.len() * 99 / 100]
        );
    }
    Ok(())
}
