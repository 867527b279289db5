// lower_program (plan.hpp): a plan over two layouts as the core's program (datamove.engines.strided,
// native_engine's _split, _windowed and program).

#include "plan.hpp"

namespace dm::planner {

bool lower_program(const Plan&, const Layout&, const Layout&, int, std::vector<int64_t>*) { return false; }  // not yet

}  // namespace dm::planner
