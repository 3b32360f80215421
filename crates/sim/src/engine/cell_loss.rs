//! Cell loss on an ATM line (`cell_loss`, `cell_loss_burst`, `cell_gemodel`): crates/link's
//! loss process decides each cell that crosses the link, as on an emulated ATM link. A lost
//! cell never reaches the far end, so AAL5 reassembly there fails its frame (and the next
//! one too when the lost cell was a frame's last).

use flowlab_link::loss::{LossModel, LossProcess};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// One link direction's cell loss, with its own generator.
pub(super) struct LineLoss {
    process: LossProcess,
    rng: ChaCha8Rng,
    pub(super) lost: u64,
}

impl LineLoss {
    /// The direction's loss, seeded apart from its impairment stage; none without a model.
    pub(super) fn new(model: LossModel, seed: u64) -> Option<Box<LineLoss>> {
        (model != LossModel::None).then(|| {
            Box::new(LineLoss {
                process: LossProcess::new(model),
                rng: ChaCha8Rng::seed_from_u64(seed ^ 0xce11_1055),
                lost: 0,
            })
        })
    }

    /// Whether the next cell on the line is lost.
    pub(super) fn lose(&mut self) -> bool {
        let lost = self.process.lose(&mut self.rng);
        self.lost += u64::from(lost);
        lost
    }
}
