//! `flowlab lab`: a local testbed of hosts as network namespaces (see `flowlab_netns::lab`).
//! This file only parses flags and prints; creating and removing labs lives in the netns
//! crate, where it is tested.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use flowlab_netns::lab;
use flowlab_runner::{format, host};

#[derive(Args, Debug)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
    /// Where labs keep their state, pidfiles and agent logs (default: $FLOWLAB_LAB_DIR, else
    /// /run/flowlab-lab).
    #[arg(long, global = true)]
    pub run_dir: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Create the lab a TOML file describes and start an agent on every host.
    #[command(
        after_help = "Examples:\n  flowlab lab up examples/lab/three-hosts.toml\n  flowlab lab up examples/lab/bottleneck.toml --no-agents"
    )]
    Up {
        /// The lab description ([lab], [[host]], [[switch]], [[link]]).
        file: PathBuf,
        /// Do not start agents.
        #[arg(long)]
        no_agents: bool,
        /// Control port of the agents.
        #[arg(long, default_value_t = lab::AGENT_PORT)]
        port: u16,
    },
    /// Stop a lab's processes and remove its namespaces and state (all labs without NAME).
    #[command(after_help = "Examples:\n  flowlab lab down three\n  flowlab lab down")]
    Down {
        /// The lab; without it, every lab (every `fl-` namespace).
        name: Option<String>,
    },
    /// Run a command inside a host's namespace.
    #[command(
        after_help = "Examples:\n  flowlab lab exec h1 -- ip route\n  flowlab lab exec --lab three h1 -- flowlab test 10.77.0.2 --rate 4M"
    )]
    Exec {
        /// The lab, if more than one has a host of that name.
        #[arg(long)]
        lab: Option<String>,
        /// The host (or switch).
        host: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// List labs and their hosts.
    Status,
    /// Run a lab's emulator (`lab up` starts it in the lab's emulator namespace).
    #[command(hide = true)]
    Emulate { dir: PathBuf },
}

pub fn run(args: LabArgs) -> anyhow::Result<ExitCode> {
    let run_dir = args.run_dir.unwrap_or_else(lab::default_run_dir);
    let out = match args.command {
        LabCommand::Up {
            file,
            no_agents,
            port,
        } => format::lab_up(&host::lab_up(&file, run_dir, port, !no_agents)?),
        LabCommand::Down { name } => format::lab_down(&lab::down(name.as_deref(), &run_dir)?),
        LabCommand::Exec { lab, host, command } => {
            use std::os::unix::process::CommandExt as _;
            let ns = lab::find_node(&run_dir, lab.as_deref(), &host)?;
            // exec replaces this process, so the command's exit status (and signals) are ours.
            let err = lab::exec_command(&ns, &command).exec();
            return Err(anyhow::anyhow!("running `ip netns exec {ns}`: {err}"));
        }
        LabCommand::Status => format::lab_status(&lab::status(&run_dir)?),
        LabCommand::Emulate { dir } => {
            lab::emulate::emulate(&dir, &mut std::io::stdout())?;
            String::new()
        }
    };
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}
