//! Host identification for report headers.

/// Reads uname(2); `None` only if the syscall fails.
fn uname() -> Option<libc::utsname> {
    // SAFETY: utsname is plain char arrays, so all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    let rc = unsafe { libc::uname(&mut u) };
    (rc == 0).then_some(u)
}

/// A NUL-terminated C string field as text (lossy).
pub(crate) fn c_field(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The node name from uname, or "unknown".
pub fn hostname() -> String {
    uname()
        .map(|u| c_field(&u.nodename))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// The kernel release from uname (e.g. "6.18.0"), or "unknown".
pub fn kernel_release() -> String {
    uname()
        .map(|u| c_field(&u.release))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// The active clocksource (tsc, hpet, ...), since it affects timestamp cost
/// and precision; "unknown" if unavailable.
pub fn clock_source() -> String {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// An interface's link speed in bit/s from sysfs (`/sys/class/net/IF/speed`, Mbit/s), or
/// `None` where it has none: loopback and veth report no speed, a link that is down -1.
pub fn link_speed_bps(interface: &str) -> Option<u64> {
    if interface.contains('/') || interface.starts_with('.') {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{interface}/speed")).ok()?;
    parse_link_speed(&text)
}

/// The sysfs speed text (Mbit/s) in bit/s: none for "-1", 0 or an unreadable value.
fn parse_link_speed(text: &str) -> Option<u64> {
    let mbps: i64 = text.trim().parse().ok()?;
    u64::try_from(mbps)
        .ok()
        .filter(|&m| m > 0)
        .map(|m| m.saturating_mul(1_000_000))
}

/// Raises this process's open-file limit to its hard limit: a test of many flows needs a
/// socket per flow at each end, beyond the usual soft limit of 1024. Returns the new limit.
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads one rlimit struct through a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(limit.rlim_cur)
}

/// Moves the calling thread into the network namespace `ip netns` made under `name`: the
/// sockets it opens from then on live there. Other threads stay where they are (tests use it
/// to act as a host of their own lab).
pub fn enter_netns(name: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns(2) on a namespace descriptor we hold open; it changes this thread only.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_strings_non_empty() {
        assert!(!hostname().is_empty());
        let rel = kernel_release();
        assert!(
            rel.chars().next().is_some_and(|c| c.is_ascii_digit()),
            "{rel}"
        );
        assert!(!clock_source().is_empty());
    }

    #[test]
    fn link_speeds_from_sysfs_text() {
        assert_eq!(parse_link_speed("10000\n"), Some(10_000_000_000));
        assert_eq!(parse_link_speed("-1\n"), None, "a link that is down");
        assert_eq!(parse_link_speed("0"), None);
        assert_eq!(parse_link_speed("fast"), None);
        // lo has a speed file only on some kernels, and then no valid speed.
        assert_eq!(link_speed_bps("lo"), None);
        assert_eq!(link_speed_bps("../../x"), None);
    }

    #[test]
    fn c_field_stops_at_nul() {
        let raw: [libc::c_char; 5] = [b'a' as _, b'b' as _, 0, b'c' as _, 0];
        assert_eq!(c_field(&raw), "ab");
        let no_nul: [libc::c_char; 2] = [b'x' as _, b'y' as _];
        assert_eq!(c_field(&no_nul), "xy");
    }
}
