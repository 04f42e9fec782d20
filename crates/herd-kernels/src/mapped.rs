//! Weights held in a read-only memory map of a file, so that loading prepared weights neither copies
//! nor touches them: pages come in from the page cache as the kernels first read them, and processes
//! that map the same file share them.
//!
//! ```
//! use herd_kernels::{Int8Matrix, MappedFile, checksum};
//! use std::io::Write;
//!
//! let weights: Vec<f32> = (0..128).map(|i| (i % 5) as f32 - 2.0).collect();
//! let w = Int8Matrix::quantize(&weights, 2, 64).unwrap();
//! // Write the three parts at 64-byte aligned offsets, map the file, and borrow them back.
//! let parts = w.parts();
//! let mut file = tempfile_in_target();
//! let mut bytes = Vec::new();
//! let mut offsets = [0u64; 3];
//! for (i, part) in [parts.quants, parts.scales, parts.mins].into_iter().enumerate() {
//!     bytes.resize(bytes.len().next_multiple_of(64), 0);
//!     offsets[i] = bytes.len() as u64;
//!     bytes.extend_from_slice(part);
//! }
//! file.write_all(&bytes).unwrap();
//! let map = MappedFile::open(&file).unwrap();
//! let mapped = Int8Matrix::from_mapped(&map, 2, 64, offsets).unwrap();
//! assert_eq!(mapped.dequantize_row(1), w.dequantize_row(1));
//! assert_eq!(checksum(mapped.parts().quants), checksum(parts.quants));
//! # fn tempfile_in_target() -> std::fs::File {
//! #     let path = std::env::temp_dir().join(format!("herd-kernels-doctest-{}", std::process::id()));
//! #     let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
//! #     std::fs::remove_file(&path).unwrap();
//! #     file
//! # }
//! ```

use std::sync::Arc;

/// A file mapped read-only. The file must not be written while mapped: prepared-weight files are
/// written under a temporary name and renamed into place, so a mapping keeps the file it opened.
#[derive(Debug)]
pub struct MappedFile {
    map: memmap2::Mmap,
}

impl MappedFile {
    pub fn open(file: &std::fs::File) -> std::io::Result<Arc<Self>> {
        // SAFETY: the mapping is read-only, and the files herd maps are replaced by rename, never
        // written in place (see the type's documentation); a file truncated behind herd's back would
        // fault (SIGBUS) rather than give wrong numbers.
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(Arc::new(Self { map }))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Plain numbers a buffer may hold: any bit pattern is a value.
pub(crate) trait Plain: Copy + Send + Sync + 'static {}
impl Plain for u8 {}
impl Plain for f32 {}

/// Values owned in memory or borrowed from a [`MappedFile`].
#[derive(Clone, Debug)]
pub(crate) enum Buffer<T: Plain> {
    Owned(Vec<T>),
    Mapped { file: Arc<MappedFile>, offset: usize, len: usize },
}

impl<T: Plain> Buffer<T> {
    /// `len` values at byte `offset` of `file`, which must lie inside it and be aligned for `T`.
    pub(crate) fn mapped(file: &Arc<MappedFile>, offset: usize, len: usize) -> Option<Self> {
        let end = len.checked_mul(size_of::<T>())?.checked_add(offset)?;
        let aligned = (file.bytes().as_ptr() as usize + offset).is_multiple_of(align_of::<T>());
        (end <= file.len() && aligned).then(|| Buffer::Mapped { file: file.clone(), offset, len })
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Buffer::Owned(v) => v,
            // SAFETY: `mapped` checked that the range lies inside the mapping and is aligned for `T`,
            // every bit pattern is a `T` (`Plain`), and the mapping lives as long as `file`.
            Buffer::Mapped { file, offset, len } => unsafe {
                std::slice::from_raw_parts(file.bytes().as_ptr().add(*offset).cast::<T>(), *len)
            },
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        let values = self.as_slice();
        // SAFETY: a `T` is plain bytes; the byte slice covers exactly the values.
        unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
    }
}

impl<T: Plain> std::ops::Deref for Buffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

/// A 64-bit checksum of `bytes` for detecting damaged files (not an adversary): XXH3-64 (seed 0), about
/// as fast as memory delivers the bytes. Prepared-weight files store these values; files written with
/// the checksum herd had before (container version 1) are refused by version and prepared again.
pub fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_sees_any_changed_byte_and_the_length() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 31 % 251) as u8).collect();
        let base = checksum(&bytes);
        for at in [0, 1, 31, 32, 500, 991, 999] {
            let mut changed = bytes.clone();
            changed[at] ^= 1;
            assert_ne!(checksum(&changed), base, "a flipped bit at {at}");
        }
        assert_ne!(checksum(&bytes[..999]), base);
        let mut longer = bytes.clone();
        longer.push(0);
        assert_ne!(checksum(&longer), base);
        assert_ne!(checksum(&[]), checksum(&[0]));
        assert_eq!(checksum(&bytes), base);
        // XXH3-64 of the empty input, as the reference implementation (xxhsum -H3) gives it.
        assert_eq!(checksum(&[]), 0x2D06_8005_38D3_94C2);
    }

    #[test]
    fn mapped_buffers_refuse_ranges_outside_the_file_or_misaligned() {
        let path = std::env::temp_dir().join(format!("herd-kernels-mapped-{}", std::process::id()));
        std::fs::write(&path, [0u8; 64]).unwrap();
        let map = MappedFile::open(&std::fs::File::open(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(Buffer::<f32>::mapped(&map, 0, 16).is_some());
        assert!(Buffer::<f32>::mapped(&map, 4, 16).is_none());
        assert!(Buffer::<f32>::mapped(&map, 2, 1).is_none());
        assert!(Buffer::<u8>::mapped(&map, 63, 1).is_some());
        assert!(Buffer::<u8>::mapped(&map, 63, usize::MAX).is_none());
        assert_eq!(Buffer::<f32>::mapped(&map, 8, 2).unwrap().as_slice(), &[0.0, 0.0]);
    }
}
