//! The memory an AF_XDP socket shares with the kernel: the UMEM (frame buffers) and the four
//! single-producer, single-consumer rings, each mapped at the offsets XDP_MMAP_OFFSETS gives.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// An anonymous or socket-backed memory mapping, unmapped on drop.
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; who may touch which bytes is decided by the rings.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access goes through atomics or disjoint frames.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len` bytes of zeroed private memory (the UMEM).
    pub(crate) fn anonymous(len: usize) -> io::Result<Mapping> {
        Mapping::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    }

    /// `len` bytes of the socket's ring at page offset `offset`.
    fn of_socket(fd: BorrowedFd<'_>, len: usize, offset: u64) -> io::Result<Mapping> {
        let flags = libc::MAP_SHARED | libc::MAP_POPULATE;
        Mapping::map(len, flags, fd.as_raw_fd(), offset as libc::off_t)
    }

    fn map(len: usize, flags: libc::c_int, fd: libc::c_int, off: libc::off_t) -> io::Result<Self> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh mapping chosen by the kernel; nothing else is at that address.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, off) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mapping { base, len })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are exactly what mmap returned and nothing uses them now.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// One ring: `size` entries of `T` behind a producer and a consumer index. The side this
/// process plays (producer for fill and tx, consumer for rx and completion) decides which
/// index it writes.
pub(crate) struct Ring<T> {
    map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    entries: *mut T,
    mask: u32,
    /// Our last view of the other side's index, to read its atomic only when needed.
    cached_prod: u32,
    cached_cons: u32,
}

// SAFETY: a ring is used by one thread at a time (it moves with its socket half); the kernel
// side synchronises through the atomic indices.
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps the ring of `size` entries (a power of two) at page offset `pgoff`, its fields at
    /// `off`.
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
    ) -> io::Result<Ring<T>> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mapping::of_socket(fd, len, pgoff)?;
        let at = |o: u64| map.as_ptr().wrapping_add(o as usize);
        let producer: *const AtomicU32 = at(off.producer).cast();
        let consumer: *const AtomicU32 = at(off.consumer).cast();
        let entries = at(off.desc).cast();
        // SAFETY: both indices lie inside the mapping (the kernel's offsets), are 4-byte
        // aligned, and are only ever accessed atomically.
        let (prod, cons) = unsafe {
            (
                (*producer).load(Ordering::Acquire),
                (*consumer).load(Ordering::Acquire),
            )
        };
        Ok(Ring {
            map,
            producer,
            consumer,
            entries,
            mask: size - 1,
            cached_prod: prod,
            cached_cons: cons,
        })
    }

    fn index(&self, which: *const AtomicU32) -> &AtomicU32 {
        // SAFETY: `which` is one of the two indices inside `self.map`, alive as long as self.
        unsafe { &*which }
    }

    fn slot(&self, i: u32) -> *mut T {
        debug_assert!(((i & self.mask) as usize) * std::mem::size_of::<T>() < self.map.len());
        self.entries.wrapping_add((i & self.mask) as usize)
    }

    /// Producer side: how many entries may be written now.
    pub(crate) fn free(&mut self) -> u32 {
        let size = self.mask + 1;
        if self.cached_prod.wrapping_sub(self.cached_cons) == size {
            self.cached_cons = self.index(self.consumer).load(Ordering::Acquire);
        }
        size - self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Producer side: writes `value` at the next free entry (the caller checked [`free`]);
    /// the kernel sees it after [`submit`].
    ///
    /// [`free`]: Ring::free
    /// [`submit`]: Ring::submit
    pub(crate) fn push(&mut self, value: T) {
        // SAFETY: the entry lies in the ring and the kernel does not read it before submit.
        unsafe { self.slot(self.cached_prod).write(value) };
        self.cached_prod = self.cached_prod.wrapping_add(1);
    }

    /// Producer side: hands the pushed entries to the kernel.
    pub(crate) fn submit(&self) {
        self.index(self.producer)
            .store(self.cached_prod, Ordering::Release);
    }

    /// Producer side: entries submitted that the kernel has not consumed yet.
    pub(crate) fn pending(&mut self) -> u32 {
        self.cached_cons = self.index(self.consumer).load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Consumer side: how many entries the kernel has produced that we have not read.
    pub(crate) fn available(&mut self) -> u32 {
        if self.cached_prod == self.cached_cons {
            self.cached_prod = self.index(self.producer).load(Ordering::Acquire);
        }
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Consumer side: the `k`-th unread entry (`k` below [`available`](Ring::available)).
    pub(crate) fn peek(&self, k: u32) -> T {
        // SAFETY: the kernel published this entry (Acquire above) and will not rewrite it
        // before we release it.
        unsafe { self.slot(self.cached_cons.wrapping_add(k)).read() }
    }

    /// Consumer side: gives the first `n` unread entries back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.index(self.consumer)
            .store(self.cached_cons, Ordering::Release);
    }
}
