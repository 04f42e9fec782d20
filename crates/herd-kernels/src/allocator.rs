//! The allocator policy herd's kernels rely on: mimalloc, told to keep the pages it frees. The binaries
//! choose mimalloc as their global allocator themselves (herd-cli's `main.rs`); this sets the policy.
//!
//! A forward pass allocates and frees megabytes of activations per layer. glibc hands such blocks back
//! to the kernel and faults them in again, zeroed, on the next pass; mimalloc by default does the same
//! after a delay. Kept pages made scoring 30 % faster in `cargo xtask bench infer`.
//!
//! ```
//! #[global_allocator]
//! static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
//!
//! fn main() {
//!     herd_kernels::keep_freed_pages();
//!     let activations = vec![0f32; 1 << 20];
//!     assert_eq!(activations.len(), 1 << 20);
//! }
//! ```

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (the same index in mimalloc 2 and 3).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Stops mimalloc from returning freed pages to the operating system (purge delay -1). Harmless where
/// mimalloc is not the global allocator (it only sets an option).
pub fn keep_freed_pages() {
    // SAFETY: setting an option stores a number in mimalloc's option table.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, -1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_the_purge_delay() {
        // SAFETY: reading an option.
        let before = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) };
        // libmimalloc-sys builds mimalloc 3, whose purge delay defaults to 1000 ms.
        let expected_default = std::env::var("MIMALLOC_PURGE_DELAY").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
        assert_eq!(before, expected_default, "index {PURGE_DELAY} is not mimalloc's purge delay");
        keep_freed_pages();
        // SAFETY: reading an option.
        assert_eq!(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) }, -1);
    }
}
