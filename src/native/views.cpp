// plan_views (plan.hpp): the output of a call as strided views of its input (datamove.plans).

#include "plan.hpp"

namespace dm::planner {

bool plan_views(const Call&, Plan*) { return false; }  // not yet: the Python side plans

}  // namespace dm::planner
