//! Native link-layer frames (`--proto raw`) at either end: the interface, its MTU, and
//! errors in words a user can act on.

use std::net::IpAddr;

use flowlab_sys::raw;

/// The interface native frames use: the one named, else the one holding the control
/// connection's local address.
pub fn raw_interface(named: Option<&str>, local_ip: IpAddr) -> Result<raw::Interface, String> {
    match named {
        Some(name) => raw::interface_named(name).map_err(|e| e.to_string()),
        None => {
            raw::interface_with_address(local_ip).map_err(|e| format!("{e}: name the interface"))
        }
    }
}

/// A native frame must fit the interface's MTU: there is no IP to fragment it.
pub fn check_mtu(interface: &raw::Interface, size: u32) -> Result<(), String> {
    let mtu = std::fs::read_to_string(format!("/sys/class/net/{}/mtu", interface.name))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    match mtu {
        Some(mtu) if size > mtu => Err(format!(
            "a native frame of {size} B exceeds the MTU of {} ({mtu} B)",
            interface.name
        )),
        _ => Ok(()),
    }
}

/// A failed AF_PACKET socket, in words a user can act on.
pub fn raw_error(interface: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            "native frames (--proto raw) need CAP_NET_RAW: run as root".to_string()
        }
        _ => format!("cannot open a native socket on {interface}: {e}"),
    }
}
