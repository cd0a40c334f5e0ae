pub mod build;
pub mod check;
pub mod control;
pub mod install;
pub mod publish;
pub mod run;
pub mod send;
pub mod tool;
