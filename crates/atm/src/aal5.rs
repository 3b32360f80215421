//! AAL5 (ITU-T I.363.5): a frame of up to 65,535 bytes carried in whole cells.
//!
//! The CPCS-PDU is the payload, 0–47 pad bytes and an 8-byte trailer (UU, CPI, big-endian
//! length, CRC-32), padded so that it fills a whole number of 48-byte cell payloads. The last
//! cell of a frame carries AUU = 1 in its PTI; nothing else delimits frames, which is why a lost
//! last cell merges two frames and why switches discard whole frames (EPD/PPD).
//!
//! [`Segmenter`] turns a payload into cells without allocating; [`Reassembler`] is the
//! receiver of one VC: push cells, get a frame or an error at each end-of-frame cell, with every
//! error counted. [`VcReassemblers`] keeps one per VPI/VCI.

use std::collections::HashMap;

use crc::{Crc, CRC_32_BZIP2};
use thiserror::Error;

use crate::cell::{CellHeader, CellRepr, PayloadType, PAYLOAD_LEN};

/// Bytes in the CPCS-PDU trailer.
pub const TRAILER_LEN: usize = 8;
/// Largest payload the 16-bit length field can describe.
pub const MAX_PAYLOAD_LEN: usize = 65_535;
/// Cells in the largest CPCS-PDU.
pub const MAX_CELLS_PER_PDU: usize = cells_for_payload(MAX_PAYLOAD_LEN);
/// CRC register left over after running the CRC over a whole correct CPCS-PDU (trailer CRC
/// included), before the final complement. A receiver compares against this.
pub const CRC_RESIDUE: u32 = 0xC704_DD7B;

/// The AAL5 CRC: CRC-32/BZIP2 (polynomial 0x04C11DB7, MSB first, init and final XOR ~0).
pub const AAL5_CRC: Crc<u32> = Crc::<u32>::new(&CRC_32_BZIP2);

/// Cells needed to carry a payload of `len` bytes: ⌈(len + 8) / 48⌉ (saturating).
pub const fn cells_for_payload(len: usize) -> usize {
    len.saturating_add(TRAILER_LEN).div_ceil(PAYLOAD_LEN)
}

/// Pad bytes between a payload of `len` bytes and the trailer, so that the PDU fills its cells.
pub const fn pad_len(len: usize) -> usize {
    (PAYLOAD_LEN - (len.saturating_add(TRAILER_LEN) % PAYLOAD_LEN)) % PAYLOAD_LEN
}

/// The CRC register over `bytes` without the final complement; a whole correct CPCS-PDU gives
/// [`CRC_RESIDUE`].
pub fn crc_residue(bytes: &[u8]) -> u32 {
    !AAL5_CRC.checksum(bytes)
}

/// Why a frame could not be built or was discarded on reassembly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Aal5Error {
    /// A payload longer than the 16-bit length field (or the receiver's limit) allows.
    #[error("oversize AAL5 payload: {len} bytes, limit {limit}")]
    Oversize {
        /// Payload length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The CRC-32 residue over the frame is wrong: a corrupted or misassembled frame.
    #[error("AAL5 CRC mismatch (residue {residue:#010x})")]
    CrcMismatch {
        /// The residue found.
        residue: u32,
    },
    /// The length field does not fit the number of cells received: cells were lost.
    #[error(
        "AAL5 length mismatch: length field {length} needs {expected_cells} cells, got {cells}"
    )]
    LengthMismatch {
        /// The trailer's length field.
        length: u16,
        /// Cells that length calls for.
        expected_cells: usize,
        /// Cells received.
        cells: usize,
    },
    /// More cells than the largest frame arrived without an end-of-frame cell (EOM lost).
    #[error("AAL5 frame exceeds {cells} cells without an end-of-frame cell")]
    TooManyCells {
        /// Cells buffered when the frame was given up.
        cells: usize,
    },
    /// The length field is zero: the sender aborted the frame.
    #[error("AAL5 frame aborted (length 0)")]
    Aborted,
    /// An empty payload: its length field would read as an abort.
    #[error("empty AAL5 payload")]
    EmptyPayload,
    /// A trailer was read from fewer than 8 bytes.
    #[error("AAL5 trailer truncated: {len} bytes")]
    TruncatedTrailer {
        /// Bytes available.
        len: usize,
    },
}

/// The parsed CPCS-PDU trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrailerRepr {
    /// CPCS user-to-user byte, passed transparently.
    pub uu: u8,
    /// Common part indicator, 0.
    pub cpi: u8,
    /// Payload length without pad; 0 means abort.
    pub length: u16,
    /// CRC-32 over payload, pad and the first 4 trailer bytes.
    pub crc: u32,
}

impl TrailerRepr {
    /// Parses the last 8 bytes of `frame`.
    pub fn parse_from_end(frame: &[u8]) -> Result<TrailerRepr, Aal5Error> {
        let Some(start) = frame.len().checked_sub(TRAILER_LEN) else {
            return Err(Aal5Error::TruncatedTrailer { len: frame.len() });
        };
        let t = &frame[start..];
        Ok(TrailerRepr {
            uu: t[0],
            cpi: t[1],
            length: u16::from_be_bytes([t[2], t[3]]),
            crc: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        })
    }

    /// The 8 trailer bytes.
    pub fn to_bytes(&self) -> [u8; TRAILER_LEN] {
        let l = self.length.to_be_bytes();
        let c = self.crc.to_be_bytes();
        [self.uu, self.cpi, l[0], l[1], c[0], c[1], c[2], c[3]]
    }
}

/// Builds the whole CPCS-PDU (payload, zero pad, trailer) of `payload`.
pub fn encode_cpcs_pdu(payload: &[u8], uu: u8, cpi: u8) -> Result<Vec<u8>, Aal5Error> {
    let trailer = trailer_for(payload, uu, cpi)?;
    let mut pdu = Vec::with_capacity(cells_for_payload(payload.len()) * PAYLOAD_LEN);
    pdu.extend_from_slice(payload);
    pdu.resize(payload.len() + pad_len(payload.len()), 0);
    pdu.extend_from_slice(&trailer.to_bytes());
    Ok(pdu)
}

/// The trailer of `payload`, CRC included.
pub fn trailer_for(payload: &[u8], uu: u8, cpi: u8) -> Result<TrailerRepr, Aal5Error> {
    if payload.is_empty() {
        return Err(Aal5Error::EmptyPayload);
    }
    let length = u16::try_from(payload.len()).map_err(|_| Aal5Error::Oversize {
        len: payload.len(),
        limit: MAX_PAYLOAD_LEN,
    })?;
    const ZEROS: [u8; PAYLOAD_LEN] = [0; PAYLOAD_LEN];
    let len_bytes = length.to_be_bytes();
    let mut digest = AAL5_CRC.digest();
    digest.update(payload);
    digest.update(&ZEROS[..pad_len(payload.len())]);
    digest.update(&[uu, cpi, len_bytes[0], len_bytes[1]]);
    Ok(TrailerRepr {
        uu,
        cpi,
        length,
        crc: digest.finalize(),
    })
}

/// Cuts a payload into the cells of its CPCS-PDU without building the PDU.
///
/// Every cell gets `header` with its PTI set to user data; the last has AUU = 1.
#[derive(Debug, Clone)]
pub struct Segmenter<'a> {
    payload: &'a [u8],
    header: CellHeader,
    trailer: [u8; TRAILER_LEN],
    next_cell: usize,
    cells: usize,
}

impl<'a> Segmenter<'a> {
    /// Segments `payload` (1–65,535 bytes; an empty payload would read as an abort, so it is
    /// refused).
    pub fn new(payload: &'a [u8], uu: u8, header: CellHeader) -> Result<Self, Aal5Error> {
        let trailer = trailer_for(payload, uu, 0)?.to_bytes();
        Ok(Segmenter {
            payload,
            header,
            trailer,
            next_cell: 0,
            cells: cells_for_payload(payload.len()),
        })
    }

    /// Cells this payload needs.
    pub fn cell_count(&self) -> usize {
        self.cells
    }
}

impl Iterator for Segmenter<'_> {
    type Item = CellRepr;

    fn next(&mut self) -> Option<CellRepr> {
        if self.next_cell >= self.cells {
            return None;
        }
        let start = self.next_cell * PAYLOAD_LEN;
        let trailer_start = self.cells * PAYLOAD_LEN - TRAILER_LEN;
        let mut payload = [0u8; PAYLOAD_LEN];
        for (i, byte) in payload.iter_mut().enumerate() {
            let at = start + i;
            *byte = if at < self.payload.len() {
                self.payload[at]
            } else if at >= trailer_start {
                self.trailer[at - trailer_start]
            } else {
                0
            };
        }
        self.next_cell += 1;
        let mut header = self.header;
        header.pti = PayloadType::UserData {
            congestion: false,
            end_of_frame: self.next_cell == self.cells,
        };
        Some(CellRepr { header, payload })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.cells - self.next_cell;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Segmenter<'_> {}

/// Segments `payload` into cells carrying `header` (a convenience over [`Segmenter`]).
pub fn segment(payload: &[u8], uu: u8, header: CellHeader) -> Result<Vec<CellRepr>, Aal5Error> {
    Ok(Segmenter::new(payload, uu, header)?.collect())
}

/// A reassembled frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pdu {
    /// The payload, pad and trailer removed.
    pub payload: Vec<u8>,
    /// The trailer's user-to-user byte.
    pub uu: u8,
    /// The trailer's CPI byte.
    pub cpi: u8,
    /// Cells the frame arrived in.
    pub cells: usize,
    /// Whether any of its cells had CLP = 1.
    pub clp: bool,
    /// Whether any of its cells had EFCI set.
    pub congestion_experienced: bool,
}

/// Counts of one receiver's cells and frames, by outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aal5Counters {
    /// User data cells pushed.
    pub cells: u64,
    /// OAM, RM and reserved cells pushed (ignored by AAL5).
    pub non_user_cells: u64,
    /// Frames delivered.
    pub frames: u64,
    /// Frames discarded for a CRC mismatch.
    pub crc_errors: u64,
    /// Frames discarded because the length field did not fit the cells received.
    pub length_errors: u64,
    /// Frames discarded because the length exceeded the receiver's limit.
    pub oversize: u64,
    /// Frames given up after too many cells without an end-of-frame cell.
    pub too_many_cells: u64,
    /// Aborted frames (length 0).
    pub aborts: u64,
    /// Cells discarded while waiting for the end of a frame already given up.
    pub discarded_cells: u64,
}

impl Aal5Counters {
    /// Frames discarded for any reason.
    pub fn frame_errors(&self) -> u64 {
        self.crc_errors + self.length_errors + self.oversize + self.too_many_cells + self.aborts
    }
}

/// The AAL5 receiver of one virtual channel.
#[derive(Debug, Clone)]
pub struct Reassembler {
    buffer: Vec<u8>,
    max_payload: usize,
    max_cells: usize,
    discarding: bool,
    clp: bool,
    congestion: bool,
    counters: Aal5Counters,
}

impl Default for Reassembler {
    fn default() -> Self {
        Reassembler::new(MAX_PAYLOAD_LEN)
    }
}

impl Reassembler {
    /// A receiver that accepts payloads up to `max_payload` bytes (at most 65,535; e.g. an
    /// interface MTU such as 9180).
    pub fn new(max_payload: usize) -> Reassembler {
        let max_payload = max_payload.min(MAX_PAYLOAD_LEN);
        Reassembler {
            buffer: Vec::new(),
            max_payload,
            max_cells: cells_for_payload(max_payload),
            discarding: false,
            clp: false,
            congestion: false,
            counters: Aal5Counters::default(),
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> &Aal5Counters {
        &self.counters
    }

    /// Cells of the frame in progress.
    pub fn buffered_cells(&self) -> usize {
        self.buffer.len() / PAYLOAD_LEN
    }

    /// Pushes one cell. Returns a frame or an error when the cell ends a frame, `None` otherwise.
    pub fn push(&mut self, cell: &CellRepr) -> Option<Result<Pdu, Aal5Error>> {
        self.push_payload(&cell.payload, cell.header.pti, cell.header.clp)
    }

    /// Pushes one cell given as its payload, PTI and CLP.
    pub fn push_payload(
        &mut self,
        payload: &[u8; PAYLOAD_LEN],
        pti: PayloadType,
        clp: bool,
    ) -> Option<Result<Pdu, Aal5Error>> {
        if !pti.is_user_data() {
            self.counters.non_user_cells += 1;
            return None;
        }
        self.counters.cells += 1;
        let end = pti.is_end_of_frame();
        if self.discarding {
            self.counters.discarded_cells += 1;
            if end {
                self.discarding = false;
            }
            return None;
        }
        if self.buffered_cells() >= self.max_cells {
            let cells = self.buffered_cells() + 1;
            self.reset();
            self.discarding = !end;
            self.counters.too_many_cells += 1;
            return Some(Err(Aal5Error::TooManyCells { cells }));
        }
        self.buffer.extend_from_slice(payload);
        self.clp |= clp;
        self.congestion |= pti.is_congestion_experienced();
        if !end {
            return None;
        }
        let outcome = self.finish();
        self.reset();
        Some(outcome)
    }

    fn reset(&mut self) {
        self.buffer.clear();
        self.clp = false;
        self.congestion = false;
    }

    fn finish(&mut self) -> Result<Pdu, Aal5Error> {
        let cells = self.buffered_cells();
        let trailer = TrailerRepr::parse_from_end(&self.buffer)?;
        if trailer.length == 0 {
            self.counters.aborts += 1;
            return Err(Aal5Error::Aborted);
        }
        let residue = crc_residue(&self.buffer);
        if residue != CRC_RESIDUE {
            self.counters.crc_errors += 1;
            return Err(Aal5Error::CrcMismatch { residue });
        }
        let length = usize::from(trailer.length);
        if length > self.max_payload {
            self.counters.oversize += 1;
            return Err(Aal5Error::Oversize {
                len: length,
                limit: self.max_payload,
            });
        }
        let expected_cells = cells_for_payload(length);
        if expected_cells != cells {
            self.counters.length_errors += 1;
            return Err(Aal5Error::LengthMismatch {
                length: trailer.length,
                expected_cells,
                cells,
            });
        }
        self.counters.frames += 1;
        Ok(Pdu {
            payload: self.buffer[..length].to_vec(),
            uu: trailer.uu,
            cpi: trailer.cpi,
            cells,
            clp: self.clp,
            congestion_experienced: self.congestion,
        })
    }
}

/// One [`Reassembler`] per VPI/VCI, created on first use up to a limit, so that a stream with
/// many bogus VCs cannot grow memory without bound.
#[derive(Debug, Clone)]
pub struct VcReassemblers {
    by_vc: HashMap<(u16, u16), Reassembler>,
    max_vcs: usize,
    max_payload: usize,
    /// Cells refused because they would have opened a VC beyond the limit.
    pub cells_on_too_many_vcs: u64,
}

impl VcReassemblers {
    /// Receivers for at most `max_vcs` VCs, each accepting payloads up to `max_payload`.
    pub fn new(max_vcs: usize, max_payload: usize) -> Self {
        VcReassemblers {
            by_vc: HashMap::new(),
            max_vcs,
            max_payload,
            cells_on_too_many_vcs: 0,
        }
    }

    /// Pushes a cell to the receiver of its VC. Idle and unassigned cells are ignored.
    pub fn push(&mut self, cell: &CellRepr) -> Option<((u16, u16), Result<Pdu, Aal5Error>)> {
        if cell.header.is_idle() || cell.header.is_unassigned() {
            return None;
        }
        let key = (cell.header.vpi, cell.header.vci);
        if !self.by_vc.contains_key(&key) {
            if self.by_vc.len() >= self.max_vcs {
                self.cells_on_too_many_vcs += 1;
                return None;
            }
            self.by_vc.insert(key, Reassembler::new(self.max_payload));
        }
        let outcome = self.by_vc.get_mut(&key)?.push(cell)?;
        Some((key, outcome))
    }

    /// The receiver of one VC, if it has seen a cell.
    pub fn get(&self, vpi: u16, vci: u16) -> Option<&Reassembler> {
        self.by_vc.get(&(vpi, vci))
    }

    /// Counters summed over all VCs.
    pub fn total_counters(&self) -> Aal5Counters {
        let mut t = Aal5Counters::default();
        for r in self.by_vc.values() {
            let c = r.counters();
            t.cells += c.cells;
            t.non_user_cells += c.non_user_cells;
            t.frames += c.frames;
            t.crc_errors += c.crc_errors;
            t.length_errors += c.length_errors;
            t.oversize += c.oversize;
            t.too_many_cells += c.too_many_cells;
            t.aborts += c.aborts;
            t.discarded_cells += c.discarded_cells;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::HeaderFormat;
    use proptest::prelude::*;

    const VC: CellHeader = CellHeader::user_data(HeaderFormat::Uni, 0, 35, false);

    #[test]
    fn crc_golden_vectors() {
        assert_eq!(AAL5_CRC.checksum(b"123456789"), 0xFC89_1918);
        let pdu = encode_cpcs_pdu(b"123456789", 0, 0).unwrap();
        assert_eq!(pdu.len(), 48);
        assert_eq!(pad_len(9), 31);
        assert!(pdu[9..40].iter().all(|&b| b == 0));
        assert_eq!(&pdu[40..44], &[0x00, 0x00, 0x00, 0x09]);
        assert_eq!(&pdu[44..48], &0xFBB9_7124u32.to_be_bytes());
        assert_eq!(crc_residue(&pdu), CRC_RESIDUE);
    }

    #[test]
    fn cells_and_pad_at_the_48_byte_steps() {
        for (len, cells, pad) in [
            (1, 1, 39),
            (40, 1, 0),
            (41, 2, 47),
            (88, 2, 0),
            (89, 3, 47),
            (1500, 32, 28),
            (9180, 192, 28),
            (65_535, 1366, 25),
        ] {
            assert_eq!(cells_for_payload(len), cells, "len {len}");
            assert_eq!(pad_len(len), pad, "len {len}");
            assert_eq!((len + pad + TRAILER_LEN) % PAYLOAD_LEN, 0);
        }
        assert_eq!(MAX_CELLS_PER_PDU, 1366);
    }

    #[test]
    fn segmentation_of_the_golden_payload() {
        let cells = segment(b"123456789", 0, VC).unwrap();
        assert_eq!(cells.len(), 1);
        assert!(cells[0].header.pti.is_end_of_frame());
        assert_eq!(
            &cells[0].payload[..],
            &encode_cpcs_pdu(b"123456789", 0, 0).unwrap()[..]
        );
    }

    #[test]
    fn only_the_last_cell_has_auu_set() {
        let cells = segment(&[0xab; 100], 7, VC).unwrap();
        assert_eq!(cells.len(), 3);
        assert!(!cells[0].header.pti.is_end_of_frame());
        assert!(!cells[1].header.pti.is_end_of_frame());
        assert!(cells[2].header.pti.is_end_of_frame());
        let mut r = Reassembler::default();
        assert!(r.push(&cells[0]).is_none());
        assert!(r.push(&cells[1]).is_none());
        let pdu = r.push(&cells[2]).unwrap().unwrap();
        assert_eq!(pdu.payload, vec![0xab; 100]);
        assert_eq!((pdu.uu, pdu.cpi, pdu.cells), (7, 0, 3));
    }

    #[test]
    fn empty_and_oversize_payloads_are_refused() {
        assert_eq!(segment(&[], 0, VC), Err(Aal5Error::EmptyPayload));
        assert!(matches!(
            encode_cpcs_pdu(&vec![0; 65_536], 0, 0),
            Err(Aal5Error::Oversize { len: 65_536, .. })
        ));
        assert!(encode_cpcs_pdu(&vec![0; 65_535], 0, 0).is_ok());
    }

    #[test]
    fn corrupted_payload_is_a_crc_error() {
        let mut cells = segment(&[1; 60], 0, VC).unwrap();
        cells[0].payload[3] ^= 0x10;
        let mut r = Reassembler::default();
        r.push(&cells[0]);
        assert!(matches!(
            r.push(&cells[1]),
            Some(Err(Aal5Error::CrcMismatch { .. }))
        ));
        assert_eq!(r.counters().crc_errors, 1);
    }

    #[test]
    fn lost_middle_cell_discards_the_frame() {
        let cells = segment(&[2; 200], 0, VC).unwrap();
        assert_eq!(cells.len(), 5);
        let mut r = Reassembler::default();
        let mut outcome = None;
        for (i, c) in cells.iter().enumerate() {
            if i != 2 {
                outcome = r.push(c);
            }
        }
        // The CRC covers the payload, so usually it is the CRC that fails first; either way
        // the frame is discarded and counted.
        let err = outcome.unwrap().unwrap_err();
        assert!(matches!(
            err,
            Aal5Error::CrcMismatch { .. } | Aal5Error::LengthMismatch { .. }
        ));
        assert_eq!(r.counters().frame_errors(), 1);
    }

    #[test]
    fn length_field_that_disagrees_with_the_cells_is_a_length_error() {
        // A frame whose CRC is right but whose length field claims one cell more than sent:
        // build the PDU by hand.
        let mut pdu = [5u8; 96];
        pdu[88..96].copy_from_slice(&[0, 0, 0x00, 100, 0, 0, 0, 0]);
        let crc = AAL5_CRC.checksum(&pdu[..92]);
        pdu[92..96].copy_from_slice(&crc.to_be_bytes());
        let mut r = Reassembler::default();
        let mut last = None;
        for (i, chunk) in pdu.chunks(48).enumerate() {
            let mut payload = [0; 48];
            payload.copy_from_slice(chunk);
            last = r.push_payload(
                &payload,
                PayloadType::UserData {
                    congestion: false,
                    end_of_frame: i == 1,
                },
                false,
            );
        }
        assert_eq!(
            last,
            Some(Err(Aal5Error::LengthMismatch {
                length: 100,
                expected_cells: 3,
                cells: 2
            }))
        );
        assert_eq!(r.counters().length_errors, 1);
    }

    #[test]
    fn lost_end_of_frame_merges_two_frames_into_an_error() {
        let a = segment(&[1; 50], 0, VC).unwrap();
        let b = segment(&[2; 50], 0, VC).unwrap();
        let mut r = Reassembler::default();
        r.push(&a[0]);
        // a[1] (the EOM) is lost.
        r.push(&b[0]);
        assert!(r.push(&b[1]).unwrap().is_err());
        // The next frame is received normally.
        for c in &a[..1] {
            r.push(c);
        }
        assert_eq!(r.push(&a[1]).unwrap().unwrap().payload, vec![1; 50]);
    }

    #[test]
    fn abort_is_length_zero() {
        let mut payload = [0u8; 48];
        payload[47] = 0xff; // whatever CRC: an abort is recognised by its length alone
        let mut r = Reassembler::default();
        assert_eq!(
            r.push_payload(&payload, PayloadType::USER_DATA_END, false),
            Some(Err(Aal5Error::Aborted))
        );
        assert_eq!(r.counters().aborts, 1);
    }

    #[test]
    fn too_many_cells_without_eom_then_resynchronise_at_the_next_eom() {
        let mut r = Reassembler::new(100); // 3 cells at most
        let payload = [0u8; 48];
        for _ in 0..3 {
            assert!(r
                .push_payload(&payload, PayloadType::USER_DATA, false)
                .is_none());
        }
        assert_eq!(
            r.push_payload(&payload, PayloadType::USER_DATA, false),
            Some(Err(Aal5Error::TooManyCells { cells: 4 }))
        );
        assert!(r
            .push_payload(&payload, PayloadType::USER_DATA, false)
            .is_none());
        assert!(r
            .push_payload(&payload, PayloadType::USER_DATA_END, false)
            .is_none());
        assert_eq!(r.counters().discarded_cells, 2);
        let good = segment(&[9; 100], 0, VC).unwrap();
        let mut out = None;
        for c in &good {
            out = r.push(c);
        }
        assert_eq!(out.unwrap().unwrap().payload, vec![9; 100]);
        assert_eq!(r.counters().too_many_cells, 1);
    }

    #[test]
    fn oversize_relative_to_the_receiver_limit() {
        let cells = segment(&[3; 200], 0, VC).unwrap();
        let mut r = Reassembler::new(150); // 4 cells allowed, 200 bytes needs 5
        let mut out = None;
        for c in &cells {
            if let Some(o) = r.push(c) {
                out = Some(o);
            }
        }
        assert!(matches!(out, Some(Err(Aal5Error::TooManyCells { .. }))));
        let mut r = Reassembler::new(190); // 5 cells allowed, but 200 > 190
        for c in &cells {
            out = r.push(c);
        }
        assert_eq!(
            out,
            Some(Err(Aal5Error::Oversize {
                len: 200,
                limit: 190
            }))
        );
    }

    #[test]
    fn clp_efci_and_non_user_cells() {
        let mut cells = segment(&[4; 60], 0, VC).unwrap();
        cells[0].header.clp = true;
        cells[1].header.pti = cells[1].header.pti.with_congestion();
        let mut oam = cells[0];
        oam.header.pti = PayloadType::OamEndToEnd;
        let mut r = Reassembler::default();
        r.push(&cells[0]);
        assert!(r.push(&oam).is_none());
        let pdu = r.push(&cells[1]).unwrap().unwrap();
        assert!(pdu.clp && pdu.congestion_experienced);
        assert_eq!(r.counters().non_user_cells, 1);
    }

    #[test]
    fn per_vc_receivers_interleave_and_are_bounded() {
        let a = segment(
            &[1; 60],
            0,
            CellHeader::user_data(HeaderFormat::Uni, 0, 40, false),
        )
        .unwrap();
        let b = segment(
            &[2; 60],
            0,
            CellHeader::user_data(HeaderFormat::Uni, 0, 41, false),
        )
        .unwrap();
        let mut rx = VcReassemblers::new(2, MAX_PAYLOAD_LEN);
        assert!(rx.push(&a[0]).is_none());
        assert!(rx.push(&b[0]).is_none());
        assert!(rx.push(&CellRepr::idle(HeaderFormat::Uni)).is_none());
        let (vc, pdu) = rx.push(&a[1]).unwrap();
        assert_eq!((vc, pdu.unwrap().payload), ((0, 40), vec![1; 60]));
        let (vc, pdu) = rx.push(&b[1]).unwrap();
        assert_eq!((vc, pdu.unwrap().payload), ((0, 41), vec![2; 60]));
        let c = segment(
            &[3; 10],
            0,
            CellHeader::user_data(HeaderFormat::Uni, 0, 42, false),
        )
        .unwrap();
        assert!(rx.push(&c[0]).is_none());
        assert_eq!(rx.cells_on_too_many_vcs, 1);
        assert_eq!(rx.total_counters().frames, 2);
        assert!(rx.get(0, 40).is_some());
    }

    proptest! {
        #[test]
        fn segment_then_reassemble_round_trips(payload in proptest::collection::vec(any::<u8>(), 1..3000), uu: u8) {
            let cells = segment(&payload, uu, VC).unwrap();
            prop_assert_eq!(cells.len(), cells_for_payload(payload.len()));
            let mut r = Reassembler::default();
            for c in &cells[..cells.len() - 1] {
                prop_assert!(r.push(c).is_none());
            }
            let pdu = r.push(&cells[cells.len() - 1]).unwrap().unwrap();
            prop_assert_eq!(pdu.payload, payload);
            prop_assert_eq!(pdu.uu, uu);
        }

        #[test]
        fn reassembler_never_panics_on_random_cells(
            cells in proptest::collection::vec((any::<[u8; 48]>(), 0u8..8, any::<bool>()), 0..200),
            max_payload in 0usize..70_000,
        ) {
            let mut r = Reassembler::new(max_payload);
            let mut outcomes = 0u64;
            for (payload, pti, clp) in &cells {
                if r.push_payload(payload, PayloadType::from_bits(*pti), *clp).is_some() {
                    outcomes += 1;
                }
            }
            let c = r.counters();
            prop_assert_eq!(outcomes, c.frames + c.frame_errors());
        }

        #[test]
        fn random_bytes_through_the_cell_parser_and_receivers_never_panic(
            stream in proptest::collection::vec(any::<u8>(), 0..53 * 60),
            max_payload in 0usize..70_000,
        ) {
            let mut rx = VcReassemblers::new(4, max_payload);
            let mut counters = crate::cell::CellErrorCounters::default();
            for chunk in stream.chunks(53) {
                if let Ok(cell) = counters.record(CellRepr::parse_bytes(chunk, crate::cell::HeaderFormat::Uni)) {
                    let _ = rx.push(&cell);
                }
            }
            prop_assert_eq!(counters.ok + counters.bad_hec + counters.truncated, stream.chunks(53).count() as u64);
        }

        #[test]
        fn a_dropped_cell_never_yields_a_wrong_frame(payload in proptest::collection::vec(any::<u8>(), 41..2000), drop_seed: usize) {
            let cells = segment(&payload, 0, VC).unwrap();
            let drop = drop_seed % (cells.len() - 1); // any but the EOM
            let mut r = Reassembler::default();
            let mut out = None;
            for (i, c) in cells.iter().enumerate() {
                if i != drop {
                    out = r.push(c);
                }
            }
            prop_assert!(out.unwrap().is_err());
        }
    }
}
