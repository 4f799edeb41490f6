fn main() {
    // The parser, checker and code generator recurse over the script's expression tree;
    // a generous stack (only the pages used are ever committed) lets long generated
    // filters (thousands of `or` terms) through, and syntax::parse refuses what is deeper.
    fslat::runtime::signals::block_in_this_thread();
    let main = std::thread::Builder::new()
        .name("fslat".into())
        .stack_size(256 << 20)
        .spawn(|| {
            fslat::runtime::signals::unblock_in_this_thread();
            fslat::cli::main()
        });
    // This thread only waits for that one (which took a copy of its capabilities): it
    // needs none (docs/metrics.md, "Privileges").
    if let Err(e) = fslat::sys::drop_thread_capabilities() {
        fslat::stderr_line!("fslat: warning: cannot drop the waiting thread's capabilities ({e})");
    }
    let status = match main.map(std::thread::JoinHandle::join) {
        Ok(Ok(status)) => status,
        Ok(Err(_)) => 101,
        Err(e) => {
            fslat::stderr_line!("fslat: error: cannot start: {e}");
            1
        }
    };
    std::process::exit(status);
}
