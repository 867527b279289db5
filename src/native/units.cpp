// lower_units (plan.hpp): SpaceToBatch and BatchToSpace of small images as units from tables
// (datamove.engines.units).

#include "plan.hpp"

namespace dm::planner {

bool lower_units(const Plan&, const Layout&, const Layout&, std::vector<std::vector<int64_t>>*) { return false; }  // not yet

}  // namespace dm::planner
