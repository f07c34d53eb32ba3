// Node-API link arguments where the platform needs them (macOS: undefined symbols allowed;
// Windows: node.lib). Nothing on Linux.
fn main() {
    napi_build::setup();
}
