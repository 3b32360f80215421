//! The XDP program that hands every frame an interface receives to one AF_XDP socket, loaded
//! with the bpf(2) system call (no C library), and attached through a BPF link so that
//! closing the link's descriptor, or the process dying, detaches it.
//!
//! The program stamps each frame with `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) in the 8 bytes
//! of XDP metadata in front of it (the copy into the socket's frame keeps them): the
//! arrival time AF_PACKET's receive stamp gave, taken when the frame reaches the hook.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`'s BPF_XDP.
const BPF_XDP: u32 = 37;
/// `XDP_FLAGS_SKB_MODE`: generic XDP, for a driver without native support.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;

/// Bytes of metadata the program puts in front of each frame: its arrival time.
pub const STAMP_LEN: usize = 8;

/// The helpers the program calls (`enum bpf_func_id`).
const HELPER_KTIME_GET_NS: i32 = 5;
const HELPER_REDIRECT_MAP: i32 = 51;
const HELPER_XDP_ADJUST_HEAD: i32 = 44;
const HELPER_XDP_ADJUST_META: i32 = 54;
/// `struct xdp_md` field offsets.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_DATA_META: i16 = 8;
const MD_RX_QUEUE_INDEX: i16 = 16;
const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;

/// One `struct bpf_insn`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    /// dst in the low nibble, src in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

// Opcodes (BPF class | size or operation | source).
const MOV64_REG: u8 = 0xbf;
const MOV64_IMM: u8 = 0xb7;
const ADD64_IMM: u8 = 0x07;
const LDX_W: u8 = 0x61;
const STX_DW: u8 = 0x7b;
const JNE_IMM: u8 = 0x55;
const JGT_REG: u8 = 0x2d;
const LD_IMM64: u8 = 0x18;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
/// `BPF_PSEUDO_MAP_FD`: the 64-bit immediate is a map's descriptor.
const PSEUDO_MAP_FD: u8 = 1;

/// Where the program puts a frame's arrival stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StampPlace {
    /// In the 8 bytes of XDP metadata in front of the frame (`bpf_xdp_adjust_meta`).
    Metadata,
    /// In 8 bytes the program puts in front of the frame itself (`bpf_xdp_adjust_head`), for
    /// kernels whose XDP programs may not call `bpf_xdp_adjust_meta` (seen on 6.18.44).
    Head,
}

/// The program, for the XSKMAP whose descriptor is `map_fd`, stamping in `place`. In C,
/// for [`StampPlace::Metadata`]:
/// `t = bpf_ktime_get_ns(); if (!bpf_xdp_adjust_meta(ctx, -8) && meta + 8 <= data)
/// *(u64 *)meta = t; return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`
/// (a frame whose queue has no socket goes on to the stack). For [`StampPlace::Head`] the
/// stamp is part of what the socket receives, so a frame cannot go without one: one that
/// cannot be given the 8 bytes in front (never on a veth, which keeps 256 bytes of headroom),
/// or whose queue has no socket, is dropped, as the stack would not read it.
pub(crate) fn program(map_fd: i32, place: StampPlace) -> Vec<Insn> {
    let (adjust, first, past, missing) = match place {
        StampPlace::Metadata => (HELPER_XDP_ADJUST_META, MD_DATA_META, MD_DATA, XDP_PASS),
        StampPlace::Head => (HELPER_XDP_ADJUST_HEAD, MD_DATA, MD_DATA_END, XDP_DROP),
    };
    // Without room for the stamp: skip it (metadata), or drop the frame (head).
    let unstamped = match place {
        StampPlace::Metadata => 6,
        StampPlace::Head => 12,
    };
    let mut p = vec![
        insn(MOV64_REG, 6, 1, 0, 0), // r6 = ctx
        insn(CALL, 0, 0, 0, HELPER_KTIME_GET_NS),
        insn(MOV64_REG, 7, 0, 0, 0), // r7 = now
        insn(MOV64_REG, 1, 6, 0, 0),
        insn(MOV64_IMM, 2, 0, 0, -(STAMP_LEN as i32)),
        insn(CALL, 0, 0, 0, adjust),
        insn(JNE_IMM, 0, 0, unstamped, 0),
        insn(LDX_W, 2, 6, first, 0),
        insn(LDX_W, 3, 6, past, 0),
        insn(MOV64_REG, 4, 2, 0, 0),
        insn(ADD64_IMM, 4, 0, 0, STAMP_LEN as i32),
        insn(JGT_REG, 4, 3, unstamped - 5, 0), // the verifier's bounds check
        insn(STX_DW, 2, 7, 0, 0),
        insn(LDX_W, 2, 6, MD_RX_QUEUE_INDEX, 0),
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0), // the 64-bit immediate's upper half
        insn(MOV64_IMM, 3, 0, 0, missing),
        insn(CALL, 0, 0, 0, HELPER_REDIRECT_MAP),
        insn(EXIT, 0, 0, 0, 0),
    ];
    if place == StampPlace::Head {
        p.extend([insn(MOV64_IMM, 0, 0, 0, XDP_DROP), insn(EXIT, 0, 0, 0, 0)]);
    }
    p
}

/// Runs one bpf(2) command on `attr` (the command's part of `union bpf_attr`); its result.
fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    let size = std::mem::size_of::<T>();
    // SAFETY: `attr` is a live, initialised #[repr(C)] prefix of `union bpf_attr` of `size`
    // bytes; the kernel reads (and for some commands writes) only those.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, (attr as *mut T).cast::<u8>(), size) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

/// Runs a bpf(2) command that creates an object, and owns its new descriptor.
fn bpf_fd<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: these commands return a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
}

#[repr(C)]
struct MapUpdate {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// The program attached to one interface, and its socket map: dropping it detaches the
/// program (the link is the only reference that keeps it attached).
#[derive(Debug)]
pub(crate) struct Attachment {
    /// Kept open until the link: the program refers to it.
    _map: OwnedFd,
    /// Closing it detaches the program.
    _link: OwnedFd,
    /// Where the program puts each frame's arrival stamp.
    pub(crate) place: StampPlace,
}

impl Attachment {
    /// Loads the program and attaches it to `ifindex` (natively where the driver can, as on
    /// veth; generically otherwise), redirecting queue 0 to `xsk`.
    pub(crate) fn attach(ifindex: u32, xsk: BorrowedFd<'_>) -> io::Result<Attachment> {
        let mut create = MapCreate {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: 1,
        };
        let map = bpf_fd(BPF_MAP_CREATE, &mut create)
            .map_err(|e| context("creating the socket map", e))?;
        let (key, value) = (0u32, xsk.as_raw_fd() as u32);
        let mut update = MapUpdate {
            map_fd: map.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: 0,
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut update).map_err(|e| context("filling the socket map", e))?;
        // The metadata keeps frames where the kernel put them; a kernel that refuses its
        // helper to XDP programs gets the stamp in front of the frame.
        let (prog, place) = load(map.as_raw_fd(), StampPlace::Metadata)
            .map(|p| (p, StampPlace::Metadata))
            .or_else(|meta_error| {
                load(map.as_raw_fd(), StampPlace::Head)
                    .map(|p| (p, StampPlace::Head))
                    .map_err(|_| meta_error)
            })?;
        let link = link(&prog, ifindex, 0)
            .or_else(|_| link(&prog, ifindex, XDP_FLAGS_SKB_MODE))
            .map_err(|e| context("attaching the program", e))?;
        Ok(Attachment {
            _map: map,
            _link: link,
            place,
        })
    }
}

fn load(map_fd: i32, place: StampPlace) -> io::Result<OwnedFd> {
    load_logged(map_fd, place, &mut []).map_err(|e| {
        // Again with the verifier's log, for its last line in the message.
        let mut log = vec![0u8; 64 << 10];
        let _ = load_logged(map_fd, place, &mut log);
        let text = String::from_utf8_lossy(&log);
        // Its verdict comes before the closing statistics.
        let verdict = text
            .trim_end_matches('\0')
            .lines()
            .rfind(|l| !l.trim().is_empty() && !l.starts_with("processed "));
        let why = verdict.map_or_else(String::new, |l| format!(" (verifier: {l})"));
        io::Error::new(e.kind(), format!("loading the XDP program: {e}{why}"))
    })
}

fn load_logged(map_fd: i32, place: StampPlace, log: &mut [u8]) -> io::Result<OwnedFd> {
    let insns = program(map_fd, place);
    let license = b"MIT OR Apache-2.0\0";
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: u32::from(!log.is_empty()),
        log_size: log.len() as u32,
        // The kernel refuses a buffer without a size, and a dangling empty one is not null.
        log_buf: if log.is_empty() {
            0
        } else {
            log.as_mut_ptr() as u64
        },
        expected_attach_type: BPF_XDP,
        ..ProgLoad::default()
    };
    attr.prog_name[..11].copy_from_slice(b"flowlab_xsk");
    bpf_fd(BPF_PROG_LOAD, &mut attr)
}

fn link(prog: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    bpf_fd(BPF_LINK_CREATE, &mut attr)
}

fn context(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}
