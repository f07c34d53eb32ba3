'use strict';
// Loads the Rust core: the addon of this platform's package (`@staleguard/<platform>`, an
// optional dependency npm installs only where it fits), or STALEGUARD_NATIVE (a path to a
// `.node` file, for development).

const { platformPackage, TARGETS } = require('./platform.cjs');

function load() {
  if (process.env.STALEGUARD_NATIVE) {
    return require(process.env.STALEGUARD_NATIVE);
  }
  const name = platformPackage();
  try {
    return require(name);
  } catch (error) {
    const tried = name ?? `nothing for ${process.platform}-${process.arch}`;
    throw new Error(
      `staleguard: cannot load its native core (${tried}): ${error.message}\n` +
        `Built for: ${TARGETS.join(', ')}. Reinstall staleguard without --no-optional ` +
        `(npm installs the package of your platform as an optional dependency).`,
      { cause: error },
    );
  }
}

module.exports = load();
