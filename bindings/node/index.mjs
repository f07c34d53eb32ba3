// The ES module face of the package: the same objects as `require('staleguard')`.
import staleguard from './index.cjs';

export const {
  project,
  inspect,
  checkCall,
  wrap,
  staleguardMiddleware,
  StaleguardError,
  InvalidJSONError,
  NotARequestError,
  UnknownFormatError,
  ConfigValueError,
  InternalError,
} = staleguard;
export default staleguard;
