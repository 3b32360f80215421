//! The 53-byte ATM cell (ITU-T I.361) and its header error control (I.432).
//!
//! A cell is a 5-byte header and 48 bytes of payload. The header carries the virtual path and
//! channel (VPI/VCI), the payload type (PTI), the cell loss priority (CLP) and the HEC, a CRC-8
//! of the first four header bytes. Two header formats exist: at the user-network interface (UNI)
//! the first four bits are generic flow control (GFC) and the VPI has 8 bits; at the
//! network-node interface (NNI) the VPI takes those bits and has 12.
//!
//! [`Cell`] is a checked view over a byte buffer; [`CellHeader`] and [`CellRepr`] are parsed
//! values. Parsing checks the HEC and reports a bad one as an error, so corrupt headers never
//! reach a switch model; [`CellErrorCounters`] counts them.

use thiserror::Error;

/// Bytes in a cell.
pub const CELL_LEN: usize = 53;
/// Bytes in a cell header.
pub const HEADER_LEN: usize = 5;
/// Bytes of payload in a cell.
pub const PAYLOAD_LEN: usize = 48;
/// Largest VPI at the UNI (8 bits).
pub const MAX_VPI_UNI: u16 = 0xff;
/// Largest VPI at the NNI (12 bits).
pub const MAX_VPI_NNI: u16 = 0x0fff;
/// The coset added to the CRC-8 so that an all-zero header does not have a zero HEC (I.432).
pub const HEC_COSET: u8 = 0x55;
/// The payload byte of an idle cell (I.432).
pub const IDLE_PAYLOAD_BYTE: u8 = 0x6a;

/// Why a cell could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CellError {
    /// The buffer is shorter than a cell (or a header).
    #[error("truncated cell: {len} bytes, need {need}")]
    Truncated {
        /// Bytes available.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The HEC byte does not match the header.
    #[error("bad HEC: header says {found:#04x}, computed {expected:#04x}")]
    BadHec {
        /// HEC computed over the header bytes.
        expected: u8,
        /// HEC found in the cell.
        found: u8,
    },
    /// A VPI does not fit the header format (8 bits at the UNI, 12 at the NNI).
    #[error("VPI {vpi} does not fit the {format:?} header")]
    VpiOutOfRange {
        /// The VPI.
        vpi: u16,
        /// The header format.
        format: HeaderFormat,
    },
    /// A GFC above 15, or a non-zero GFC at the NNI.
    #[error("GFC {gfc} does not fit the {format:?} header")]
    GfcOutOfRange {
        /// The GFC.
        gfc: u8,
        /// The header format.
        format: HeaderFormat,
    },
}

/// The two header layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HeaderFormat {
    /// User-network interface: GFC 4 | VPI 8 | VCI 16 | PTI 3 | CLP 1.
    #[default]
    Uni,
    /// Network-node interface: VPI 12 | VCI 16 | PTI 3 | CLP 1.
    Nni,
}

impl HeaderFormat {
    /// Largest VPI this format can carry.
    pub const fn max_vpi(self) -> u16 {
        match self {
            HeaderFormat::Uni => MAX_VPI_UNI,
            HeaderFormat::Nni => MAX_VPI_NNI,
        }
    }
}

/// The payload type indicator (PTI), all eight codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadType {
    /// Codes 0–3: user data. `congestion` is the EFCI bit (set by a congested switch);
    /// `end_of_frame` is the ATM-user-to-user bit, which AAL5 sets on the last cell of a frame.
    UserData {
        /// Explicit forward congestion indication (PTI bit 1).
        congestion: bool,
        /// ATM-user-to-user indication, AUU (PTI bit 0): the last cell of an AAL5 frame.
        end_of_frame: bool,
    },
    /// Code 4: OAM F5 segment flow.
    OamSegment,
    /// Code 5: OAM F5 end-to-end flow.
    OamEndToEnd,
    /// Code 6: resource management (ABR RM cells).
    ResourceManagement,
    /// Code 7: reserved.
    Reserved,
}

impl PayloadType {
    /// User data, no congestion, not the last cell of a frame (PTI 0).
    pub const USER_DATA: PayloadType = PayloadType::UserData {
        congestion: false,
        end_of_frame: false,
    };
    /// User data, no congestion, last cell of a frame (PTI 1).
    pub const USER_DATA_END: PayloadType = PayloadType::UserData {
        congestion: false,
        end_of_frame: true,
    };

    /// Decodes the 3 PTI bits (higher bits are ignored, so every byte decodes).
    pub const fn from_bits(bits: u8) -> PayloadType {
        match bits & 0b111 {
            0..=3 => PayloadType::UserData {
                congestion: bits & 0b010 != 0,
                end_of_frame: bits & 0b001 != 0,
            },
            4 => PayloadType::OamSegment,
            5 => PayloadType::OamEndToEnd,
            6 => PayloadType::ResourceManagement,
            _ => PayloadType::Reserved,
        }
    }

    /// The 3 PTI bits.
    pub const fn bits(self) -> u8 {
        match self {
            PayloadType::UserData {
                congestion,
                end_of_frame,
            } => ((congestion as u8) << 1) | end_of_frame as u8,
            PayloadType::OamSegment => 4,
            PayloadType::OamEndToEnd => 5,
            PayloadType::ResourceManagement => 6,
            PayloadType::Reserved => 7,
        }
    }

    /// Whether this is a user data cell (PTI 0–3).
    pub const fn is_user_data(self) -> bool {
        matches!(self, PayloadType::UserData { .. })
    }

    /// Whether this user data cell ends an AAL5 frame (AUU = 1); false for non-user cells.
    pub const fn is_end_of_frame(self) -> bool {
        matches!(
            self,
            PayloadType::UserData {
                end_of_frame: true,
                ..
            }
        )
    }

    /// Whether EFCI is set on a user data cell.
    pub const fn is_congestion_experienced(self) -> bool {
        matches!(
            self,
            PayloadType::UserData {
                congestion: true,
                ..
            }
        )
    }

    /// The same type with EFCI set (what a congested switch does); non-user cells unchanged.
    pub const fn with_congestion(self) -> PayloadType {
        match self {
            PayloadType::UserData { end_of_frame, .. } => PayloadType::UserData {
                congestion: true,
                end_of_frame,
            },
            other => other,
        }
    }
}

const fn crc8_table() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x07
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// CRC-8 (x⁸+x²+x+1, MSB first, initial 0) lookup table.
static CRC8_TABLE: [u8; 256] = crc8_table();

/// The HEC of four header bytes: CRC-8 with generator 0x07, XOR the coset 0x55.
pub fn hec(header: [u8; 4]) -> u8 {
    let mut crc = 0u8;
    for byte in header {
        crc = CRC8_TABLE[usize::from(crc ^ byte)];
    }
    crc ^ HEC_COSET
}

/// A checked view over the bytes of one cell.
///
/// Built only through [`Cell::new_checked`], so every accessor can index the header and
/// payload without panicking. The HEC is not checked by the view: call [`Cell::check_hec`] or
/// parse into a [`CellRepr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Cell<T> {
    /// Wraps a buffer of at least 53 bytes (bytes past 53 are ignored).
    pub fn new_checked(buffer: T) -> Result<Cell<T>, CellError> {
        let len = buffer.as_ref().len();
        if len < CELL_LEN {
            return Err(CellError::Truncated {
                len,
                need: CELL_LEN,
            });
        }
        Ok(Cell { buffer })
    }

    /// Gives back the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The four header bytes the HEC covers.
    pub fn header_bytes(&self) -> [u8; 4] {
        self.word().to_be_bytes()
    }

    /// Generic flow control (UNI only; at the NNI these bits belong to the VPI).
    pub fn gfc(&self) -> u8 {
        (self.word() >> 28) as u8
    }

    /// The VPI as read in `format`.
    pub fn vpi(&self, format: HeaderFormat) -> u16 {
        let w = self.word();
        match format {
            HeaderFormat::Uni => ((w >> 20) & 0xff) as u16,
            HeaderFormat::Nni => ((w >> 20) & 0xfff) as u16,
        }
    }

    /// The VCI.
    pub fn vci(&self) -> u16 {
        ((self.word() >> 4) & 0xffff) as u16
    }

    /// The payload type.
    pub fn payload_type(&self) -> PayloadType {
        PayloadType::from_bits(((self.word() >> 1) & 0b111) as u8)
    }

    /// Cell loss priority: `true` means discard this cell first.
    pub fn clp(&self) -> bool {
        self.word() & 1 != 0
    }

    /// The HEC byte as found in the cell.
    pub fn hec(&self) -> u8 {
        self.buffer.as_ref()[4]
    }

    /// The HEC the header bytes call for.
    pub fn computed_hec(&self) -> u8 {
        hec(self.header_bytes())
    }

    /// Checks the HEC.
    pub fn check_hec(&self) -> Result<(), CellError> {
        let expected = self.computed_hec();
        let found = self.hec();
        if expected == found {
            Ok(())
        } else {
            Err(CellError::BadHec { expected, found })
        }
    }

    /// The 48 payload bytes.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..CELL_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Cell<T> {
    /// The 48 payload bytes, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..CELL_LEN]
    }

    /// Writes the four header bytes and recomputes the HEC.
    pub fn set_header_bytes(&mut self, header: [u8; 4]) {
        let b = self.buffer.as_mut();
        b[..4].copy_from_slice(&header);
        b[4] = hec(header);
    }

    /// Sets the CLP bit and recomputes the HEC (what a policer does when it tags a cell).
    pub fn set_clp(&mut self, clp: bool) {
        let w = (self.word() & !1) | u32::from(clp);
        self.set_header_bytes(w.to_be_bytes());
    }

    /// Sets the payload type and recomputes the HEC (e.g. EFCI marking).
    pub fn set_payload_type(&mut self, pti: PayloadType) {
        let w = (self.word() & !0b1110) | (u32::from(pti.bits()) << 1);
        self.set_header_bytes(w.to_be_bytes());
    }

    /// Recomputes the HEC from the header bytes as they stand.
    pub fn fill_hec(&mut self) {
        let header = self.header_bytes();
        self.buffer.as_mut()[4] = hec(header);
    }
}

/// A parsed cell header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CellHeader {
    /// UNI or NNI layout.
    pub format: HeaderFormat,
    /// Generic flow control, 0–15 at the UNI, always 0 at the NNI.
    pub gfc: u8,
    /// Virtual path identifier (8 bits at the UNI, 12 at the NNI).
    pub vpi: u16,
    /// Virtual channel identifier.
    pub vci: u16,
    /// Payload type.
    pub pti: PayloadType,
    /// Cell loss priority.
    pub clp: bool,
}

impl CellHeader {
    /// A user data header on `vpi`/`vci` with CLP 0.
    pub const fn user_data(format: HeaderFormat, vpi: u16, vci: u16, end_of_frame: bool) -> Self {
        CellHeader {
            format,
            gfc: 0,
            vpi,
            vci,
            pti: PayloadType::UserData {
                congestion: false,
                end_of_frame,
            },
            clp: false,
        }
    }

    /// The idle cell header (I.432): VPI 0, VCI 0, PTI 0, CLP 1.
    pub const fn idle(format: HeaderFormat) -> Self {
        CellHeader {
            format,
            gfc: 0,
            vpi: 0,
            vci: 0,
            pti: PayloadType::USER_DATA,
            clp: true,
        }
    }

    /// Whether this is an idle cell (inserted by the physical layer, not switched).
    pub fn is_idle(&self) -> bool {
        self.gfc == 0
            && self.vpi == 0
            && self.vci == 0
            && self.pti == PayloadType::USER_DATA
            && self.clp
    }

    /// Whether this is an unassigned cell (all-zero header: carries no connection).
    pub fn is_unassigned(&self) -> bool {
        self.gfc == 0
            && self.vpi == 0
            && self.vci == 0
            && self.pti == PayloadType::USER_DATA
            && !self.clp
    }

    /// Parses the first 5 bytes of `bytes` as a header, checking the HEC.
    pub fn parse(bytes: &[u8], format: HeaderFormat) -> Result<CellHeader, CellError> {
        let Some(b) = bytes.get(..HEADER_LEN) else {
            return Err(CellError::Truncated {
                len: bytes.len(),
                need: HEADER_LEN,
            });
        };
        let header = [b[0], b[1], b[2], b[3]];
        let expected = hec(header);
        if expected != b[4] {
            return Err(CellError::BadHec {
                expected,
                found: b[4],
            });
        }
        Ok(Self::from_word(u32::from_be_bytes(header), format))
    }

    fn from_word(w: u32, format: HeaderFormat) -> CellHeader {
        let (gfc, vpi) = match format {
            HeaderFormat::Uni => ((w >> 28) as u8, ((w >> 20) & 0xff) as u16),
            HeaderFormat::Nni => (0, ((w >> 20) & 0xfff) as u16),
        };
        CellHeader {
            format,
            gfc,
            vpi,
            vci: ((w >> 4) & 0xffff) as u16,
            pti: PayloadType::from_bits(((w >> 1) & 0b111) as u8),
            clp: w & 1 != 0,
        }
    }

    /// Checks that every field fits the header format.
    pub fn validate(&self) -> Result<(), CellError> {
        if self.vpi > self.format.max_vpi() {
            return Err(CellError::VpiOutOfRange {
                vpi: self.vpi,
                format: self.format,
            });
        }
        let gfc_ok = match self.format {
            HeaderFormat::Uni => self.gfc <= 0x0f,
            HeaderFormat::Nni => self.gfc == 0,
        };
        if !gfc_ok {
            return Err(CellError::GfcOutOfRange {
                gfc: self.gfc,
                format: self.format,
            });
        }
        Ok(())
    }

    /// The four header bytes the HEC covers.
    pub fn header_bytes(&self) -> Result<[u8; 4], CellError> {
        self.validate()?;
        let top = match self.format {
            HeaderFormat::Uni => (u32::from(self.gfc) << 28) | (u32::from(self.vpi) << 20),
            HeaderFormat::Nni => u32::from(self.vpi) << 20,
        };
        let w = top
            | (u32::from(self.vci) << 4)
            | (u32::from(self.pti.bits()) << 1)
            | u32::from(self.clp);
        Ok(w.to_be_bytes())
    }

    /// The five header bytes, HEC included.
    pub fn to_bytes(&self) -> Result<[u8; HEADER_LEN], CellError> {
        let h = self.header_bytes()?;
        Ok([h[0], h[1], h[2], h[3], hec(h)])
    }

    /// Writes the header (HEC included) into the first 5 bytes of `buffer`.
    pub fn emit(&self, buffer: &mut [u8]) -> Result<(), CellError> {
        let len = buffer.len();
        let Some(out) = buffer.get_mut(..HEADER_LEN) else {
            return Err(CellError::Truncated {
                len,
                need: HEADER_LEN,
            });
        };
        out.copy_from_slice(&self.to_bytes()?);
        Ok(())
    }
}

/// A parsed cell: its header and its 48 payload bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CellRepr {
    /// The header.
    pub header: CellHeader,
    /// The payload.
    pub payload: [u8; PAYLOAD_LEN],
}

impl CellRepr {
    /// The idle cell: idle header, payload 0x6A.
    pub const fn idle(format: HeaderFormat) -> CellRepr {
        CellRepr {
            header: CellHeader::idle(format),
            payload: [IDLE_PAYLOAD_BYTE; PAYLOAD_LEN],
        }
    }

    /// Parses a checked cell view, verifying the HEC.
    pub fn parse<T: AsRef<[u8]>>(
        cell: &Cell<T>,
        format: HeaderFormat,
    ) -> Result<CellRepr, CellError> {
        cell.check_hec()?;
        let header = CellHeader::from_word(u32::from_be_bytes(cell.header_bytes()), format);
        let mut payload = [0u8; PAYLOAD_LEN];
        payload.copy_from_slice(cell.payload());
        Ok(CellRepr { header, payload })
    }

    /// Parses untrusted bytes (at least 53) as a cell.
    pub fn parse_bytes(bytes: &[u8], format: HeaderFormat) -> Result<CellRepr, CellError> {
        CellRepr::parse(&Cell::new_checked(bytes)?, format)
    }

    /// Writes header (with HEC) and payload into a checked cell view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, cell: &mut Cell<T>) -> Result<(), CellError> {
        let header = self.header.header_bytes()?;
        cell.set_header_bytes(header);
        cell.payload_mut().copy_from_slice(&self.payload);
        Ok(())
    }

    /// The 53 bytes of this cell.
    pub fn to_bytes(&self) -> Result<[u8; CELL_LEN], CellError> {
        let mut bytes = [0u8; CELL_LEN];
        self.emit(&mut Cell::new_checked(&mut bytes[..])?)?;
        Ok(bytes)
    }
}

/// Counts of cells received from untrusted bytes, by outcome, like a line card's HEC counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CellErrorCounters {
    /// Cells parsed with a good HEC.
    pub ok: u64,
    /// Buffers too short to be a cell.
    pub truncated: u64,
    /// Cells discarded for a bad HEC.
    pub bad_hec: u64,
}

impl CellErrorCounters {
    /// Counts one parse outcome and passes it on.
    pub fn record<V>(&mut self, outcome: Result<V, CellError>) -> Result<V, CellError> {
        match &outcome {
            Ok(_) => self.ok += 1,
            Err(CellError::Truncated { .. }) => self.truncated += 1,
            Err(CellError::BadHec { .. }) => self.bad_hec += 1,
            Err(CellError::VpiOutOfRange { .. } | CellError::GfcOutOfRange { .. }) => {}
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hec_golden_vectors() {
        // Idle cell header.
        assert_eq!(hec([0x00, 0x00, 0x00, 0x01]), 0x52);
        // Unassigned cell header: the coset alone.
        assert_eq!(hec([0x00, 0x00, 0x00, 0x00]), 0x55);
        // VPI 0 / VCI 5 (signalling), PTI 0, CLP 0.
        let sig = CellHeader::user_data(HeaderFormat::Uni, 0, 5, false);
        assert_eq!(sig.header_bytes().unwrap(), [0x00, 0x00, 0x00, 0x50]);
        assert_eq!(sig.to_bytes().unwrap()[4], 0xE2);
    }

    #[test]
    fn hec_matches_the_crc_crate_i432_definition() {
        let crc = crc::Crc::<u8>::new(&crc::CRC_8_I_432_1);
        for w in [0u32, 1, 0x50, 0xdead_beef, 0xffff_ffff, 0x0123_4567] {
            assert_eq!(hec(w.to_be_bytes()), crc.checksum(&w.to_be_bytes()));
        }
    }

    #[test]
    fn idle_cell_round_trips() {
        let idle = CellRepr::idle(HeaderFormat::Uni);
        let bytes = idle.to_bytes().unwrap();
        assert_eq!(&bytes[..5], &[0, 0, 0, 1, 0x52]);
        assert!(bytes[5..].iter().all(|&b| b == 0x6a));
        let parsed = CellRepr::parse_bytes(&bytes, HeaderFormat::Uni).unwrap();
        assert!(parsed.header.is_idle());
        assert!(!parsed.header.is_unassigned());
    }

    #[test]
    fn uni_field_layout() {
        let header = CellHeader {
            format: HeaderFormat::Uni,
            gfc: 0xa,
            vpi: 0xbc,
            vci: 0x1234,
            pti: PayloadType::from_bits(0b011),
            clp: true,
        };
        let bytes = header.to_bytes().unwrap();
        assert_eq!(&bytes[..4], &[0xab, 0xc1, 0x23, 0x47]);
        assert_eq!(
            CellHeader::parse(&bytes, HeaderFormat::Uni).unwrap(),
            header
        );
    }

    #[test]
    fn nni_vpi_takes_the_gfc_bits() {
        let header = CellHeader {
            format: HeaderFormat::Nni,
            gfc: 0,
            vpi: 0xabc,
            vci: 0x0020,
            pti: PayloadType::OamEndToEnd,
            clp: false,
        };
        let bytes = header.to_bytes().unwrap();
        assert_eq!(&bytes[..4], &[0xab, 0xc0, 0x02, 0x0a]);
        assert_eq!(
            CellHeader::parse(&bytes, HeaderFormat::Nni).unwrap(),
            header
        );
        // Read at the UNI, the same bytes give GFC 0xa and VPI 0xbc.
        let uni = CellHeader::parse(&bytes, HeaderFormat::Uni).unwrap();
        assert_eq!((uni.gfc, uni.vpi), (0xa, 0xbc));
    }

    #[test]
    fn out_of_range_fields_are_errors_not_truncation() {
        let mut header = CellHeader::user_data(HeaderFormat::Uni, 256, 1, false);
        assert!(matches!(
            header.to_bytes(),
            Err(CellError::VpiOutOfRange { vpi: 256, .. })
        ));
        header.format = HeaderFormat::Nni;
        assert!(header.to_bytes().is_ok());
        header.vpi = 4096;
        assert!(header.to_bytes().is_err());
        let mut gfc = CellHeader::user_data(HeaderFormat::Uni, 0, 1, false);
        gfc.gfc = 16;
        assert!(matches!(
            gfc.to_bytes(),
            Err(CellError::GfcOutOfRange { .. })
        ));
        gfc.gfc = 1;
        gfc.format = HeaderFormat::Nni;
        assert!(gfc.to_bytes().is_err());
    }

    #[test]
    fn pti_codes() {
        for bits in 0..8u8 {
            assert_eq!(PayloadType::from_bits(bits).bits(), bits);
        }
        assert_eq!(PayloadType::from_bits(0), PayloadType::USER_DATA);
        assert!(PayloadType::from_bits(1).is_end_of_frame());
        assert!(PayloadType::from_bits(2).is_congestion_experienced());
        assert!(!PayloadType::from_bits(2).is_end_of_frame());
        assert!(PayloadType::from_bits(3).is_end_of_frame());
        assert_eq!(PayloadType::from_bits(4), PayloadType::OamSegment);
        assert_eq!(PayloadType::from_bits(5), PayloadType::OamEndToEnd);
        assert_eq!(PayloadType::from_bits(6), PayloadType::ResourceManagement);
        assert_eq!(PayloadType::from_bits(7), PayloadType::Reserved);
        assert!(!PayloadType::OamSegment.is_user_data());
        assert_eq!(PayloadType::USER_DATA_END.with_congestion().bits(), 3);
        assert_eq!(PayloadType::OamSegment.with_congestion().bits(), 4);
    }

    #[test]
    fn last_cell_sets_bit_0x02_of_byte_3_like_usbatm() {
        let last = CellHeader::user_data(HeaderFormat::Uni, 0, 35, true);
        let not_last = CellHeader::user_data(HeaderFormat::Uni, 0, 35, false);
        let a = last.to_bytes().unwrap();
        let b = not_last.to_bytes().unwrap();
        assert_eq!(a[3], b[3] | 0x02);
    }

    #[test]
    fn truncated_and_bad_hec_are_errors_and_counted() {
        let mut counters = CellErrorCounters::default();
        assert!(counters
            .record(CellRepr::parse_bytes(&[0u8; 52], HeaderFormat::Uni))
            .is_err());
        let mut bytes = CellRepr::idle(HeaderFormat::Uni).to_bytes().unwrap();
        bytes[4] ^= 1;
        assert_eq!(
            counters.record(CellRepr::parse_bytes(&bytes, HeaderFormat::Uni)),
            Err(CellError::BadHec {
                expected: 0x52,
                found: 0x53
            })
        );
        bytes[4] ^= 1;
        assert!(counters
            .record(CellRepr::parse_bytes(&bytes, HeaderFormat::Uni))
            .is_ok());
        assert_eq!(
            counters,
            CellErrorCounters {
                ok: 1,
                truncated: 1,
                bad_hec: 1
            }
        );
        assert!(CellHeader::parse(&[0, 0, 0], HeaderFormat::Uni).is_err());
    }

    #[test]
    fn view_setters_keep_the_hec_valid() {
        let repr = CellRepr {
            header: CellHeader::user_data(HeaderFormat::Uni, 1, 100, false),
            payload: [7; PAYLOAD_LEN],
        };
        let mut bytes = repr.to_bytes().unwrap();
        let mut cell = Cell::new_checked(&mut bytes[..]).unwrap();
        cell.set_clp(true);
        cell.set_payload_type(PayloadType::USER_DATA_END.with_congestion());
        assert!(cell.check_hec().is_ok());
        assert!(cell.clp());
        assert_eq!(cell.payload_type().bits(), 3);
        assert_eq!((cell.vpi(HeaderFormat::Uni), cell.vci()), (1, 100));
        assert_eq!(cell.gfc(), 0);
        cell.payload_mut()[0] = 9;
        cell.fill_hec();
        assert_eq!(cell.payload()[0], 9);
        let parsed = CellRepr::parse(&cell, HeaderFormat::Uni).unwrap();
        assert!(parsed.header.clp);
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80), nni in any::<bool>()) {
            let format = if nni { HeaderFormat::Nni } else { HeaderFormat::Uni };
            let _ = CellRepr::parse_bytes(&bytes, format);
            let _ = CellHeader::parse(&bytes, format);
            if let Ok(view) = Cell::new_checked(&bytes[..]) {
                let _ = (view.gfc(), view.vpi(format), view.vci(), view.payload_type(), view.clp());
            }
        }

        #[test]
        fn header_round_trips(gfc in 0u8..16, vpi in 0u16..4096, vci: u16, pti in 0u8..8, clp: bool, nni: bool, payload: [u8; 48]) {
            let format = if nni { HeaderFormat::Nni } else { HeaderFormat::Uni };
            let header = CellHeader {
                format,
                gfc: if nni { 0 } else { gfc },
                vpi: if nni { vpi } else { vpi & 0xff },
                vci,
                pti: PayloadType::from_bits(pti),
                clp,
            };
            let repr = CellRepr { header, payload };
            let bytes = repr.to_bytes().unwrap();
            prop_assert_eq!(CellRepr::parse_bytes(&bytes, format).unwrap(), repr);
        }

        #[test]
        fn every_single_bit_header_error_is_detected(w: u32, bit in 0usize..40) {
            let h = w.to_be_bytes();
            let mut bytes = [h[0], h[1], h[2], h[3], hec(h)];
            bytes[bit / 8] ^= 0x80 >> (bit % 8);
            let is_bad_hec = matches!(
                CellHeader::parse(&bytes, HeaderFormat::Uni),
                Err(CellError::BadHec { .. })
            );
            prop_assert!(is_bad_hec);
        }
    }
}
