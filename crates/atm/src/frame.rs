//! AAL5 frames delimited at the cell level, on cell metadata: what a receiver knows before
//! the CRC check. A frame ends at the cell with the end-of-frame bit; a frame that lost a
//! cell arrives short, and one that lost its last cell runs into the next frame, so both
//! fail (the CRC would reject them). The simulator and the emulator decide with this one
//! type which frames survive cell loss.

use crate::switch::CellMeta;

/// One VC's receiver: counts the cells of the frame being received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameDelimiter {
    active: bool,
    frame: u32,
    cells: u32,
    merged: bool,
}

/// A frame closed by an end-of-frame cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delimited {
    /// The frame number of the closing cell.
    pub frame: u32,
    /// Cells received since the previous end of frame.
    pub cells: u32,
    /// Cells of more than one frame were received (an end-of-frame cell was lost).
    pub merged: bool,
}

impl Delimited {
    /// Whether exactly the frame's own `expected_cells` arrived: the frame is delivered.
    pub fn is_intact(&self, expected_cells: u32) -> bool {
        !self.merged && self.cells == expected_cells
    }
}

impl FrameDelimiter {
    /// Takes the next cell received on the VC; returns the frame it closes, if it is the
    /// end-of-frame cell.
    pub fn push(&mut self, cell: &CellMeta) -> Option<Delimited> {
        if !self.active {
            *self = FrameDelimiter {
                active: true,
                frame: cell.frame,
                cells: 0,
                merged: false,
            };
        } else if self.frame != cell.frame {
            self.merged = true;
            self.frame = cell.frame;
        }
        self.cells += 1;
        if !cell.is_end_of_frame() {
            return None;
        }
        let done = std::mem::take(self);
        Some(Delimited {
            frame: done.frame,
            cells: done.cells,
            merged: done.merged,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::VcId;

    /// Frames of `lens` cells, numbered from 0, minus the (frame, cell) pairs in `lost`.
    fn receive(lens: &[u32], lost: &[(u32, u32)]) -> Vec<(u32, bool)> {
        let mut d = FrameDelimiter::default();
        let mut out = Vec::new();
        for (f, &n) in lens.iter().enumerate() {
            let f = f as u32;
            for j in 0..n {
                if lost.contains(&(f, j)) {
                    continue;
                }
                let cell = CellMeta::user_data(VcId(0), f, j + 1 == n);
                if let Some(done) = d.push(&cell) {
                    out.push((done.frame, done.is_intact(lens[done.frame as usize])));
                }
            }
        }
        out
    }

    #[test]
    fn intact_frames_pass_and_a_lost_cell_fails_its_frame_only() {
        assert_eq!(receive(&[3, 1, 2], &[]), [(0, true), (1, true), (2, true)]);
        // A middle cell lost: that frame arrives short.
        assert_eq!(receive(&[3, 2], &[(0, 1)]), [(0, false), (1, true)]);
        // A first cell lost: short too.
        assert_eq!(receive(&[3, 2], &[(1, 0)]), [(0, true), (1, false)]);
    }

    #[test]
    fn a_lost_end_of_frame_cell_merges_two_frames_and_both_fail() {
        assert_eq!(receive(&[2, 2, 1], &[(0, 1)]), [(1, false), (2, true)]);
        // Even if the merged count happens to equal the closing frame's length.
        assert_eq!(receive(&[1, 2, 1], &[(0, 0), (1, 1)]), [(2, false)]);
        assert_eq!(receive(&[2, 3], &[(0, 1), (1, 0)]), [(1, false)]);
    }
}
