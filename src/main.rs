fn main() {
    std::process::exit(fslat::cli::main());
}
