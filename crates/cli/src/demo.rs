pub fn run(_a: crate::args::DemoArgs) -> anyhow::Result<std::process::ExitCode> { todo!() }
