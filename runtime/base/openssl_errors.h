#ifndef CORESCAPE_RUNTIME_BASE_OPENSSL_ERRORS_H_
#define CORESCAPE_RUNTIME_BASE_OPENSSL_ERRORS_H_

#include <string>

namespace corescape {

// OpenSSL's error queue as text, "; "-separated, for error messages; empties
// the queue. "no OpenSSL error recorded" when it is empty.
std::string OpenSslErrors();

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_OPENSSL_ERRORS_H_
